"""New WebSocket connections admitted per client address, at the HTTP upgrade.

A WebSocket attacker closed with 1008 at its message budget (``edge/websocket_close.py``)
could connect again at once: each handshake, consumer and first status was server work, and
three such from one address held every other request at 2.7 to 13 times its calm latency (issue
47). Here each client address (:func:`core.client_address.address_of`: behind a trusted proxy,
the ``X-Forwarded-For`` hop it saw) has ``WEBSOCKET_CONNECTS_PER_CLIENT`` new connections (a
token bucket, :mod:`core.connection_admission`) and ``WEBSOCKET_OPEN_PER_CLIENT`` open at once,
one process's count.

They are taken in the server (``edge/server.py``'s request class), as the upgrade request is
read, before daphne builds a WebSocket protocol or the application is called. Past them, the
upgrade is answered ``429 Too Many Requests`` with ``Retry-After`` and the connection closed: a
browser's WebSocket then fails before it opens (its ``close`` event, code 1006, and no
``open``), and Python's ``websockets`` raises ``InvalidStatus`` with the answer. Nothing of the
WebSocket is made: no handshake, no application, no close. A 1008 close instead would have
needed the whole handshake first, and a browser's page opened it, which the viewer page takes
for a connection that worked.

The answer goes out :data:`REFUSAL_DELAY_SEC` after the request, as ``edge/rate_limit_gate.py``'s
gate does: a client that connects again as soon as it is answered then waits that long each
time, a connection held idle meanwhile (Twisted reads no further request on it), so one that
never honours ``Retry-After`` is held to a refusal a second per connection it opens at once.

Each refusal held is a socket and a connection kept for that second, so they are bounded too
(:class:`RefusalsHeld`): at most :data:`REFUSALS_HELD_PER_CLIENT` for one client address and
:data:`REFUSALS_HELD` in all, in this process; a refusal past either is answered at once, the
same answer without the wait. Unbounded, a client opening thousands of connections at once had
each held, a file descriptor apiece, against a process's limit of open files (1,024 by default
under systemd) that every other connection shares. Answered at once, those past the bound cost
the server what they cost held (about 0.5 ms of CPU each) and let the client ask again sooner:
as fast as any other request it could send, which the bound on held ones does not worsen. A
client's place is given back when its answer goes out, or when it hangs up first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings

from core.client_address import address_of
from core.connection_admission import ConnectionAdmission, Refusal

REFUSAL_DELAY_SEC = 1.0
# Refusals held for REFUSAL_DELAY_SEC at once: for one address (a page's reconnects, even from
# several tabs, are a few at a time), and in all (a small share of the open files' limit).
REFUSALS_HELD_PER_CLIENT = 16
REFUSALS_HELD = 256


class RefusalsHeld:
    """How many refusals are being held, for each client and in all, within bounds. Not
    thread-safe: for one event loop."""

    def __init__(self, *, per_client: int, in_all: int) -> None:
        self.per_client = per_client
        self.in_all = in_all
        self._held: dict[str, int] = {}
        self.total = 0

    def take(self, client: str) -> bool:
        """Count one more refusal held for ``client``, if both bounds have room: whether they
        had (nothing counted if not)."""
        held = self._held.get(client, 0)
        if held >= self.per_client or self.total >= self.in_all:
            return False
        self._held[client] = held + 1
        self.total += 1
        return True

    def give_back(self, client: str) -> None:
        """A refusal :meth:`take` counted for ``client`` is no longer held."""
        held = self._held.pop(client)
        if held > 1:
            self._held[client] = held - 1
        self.total -= 1

    def held(self, client: str) -> int:
        return self._held.get(client, 0)


@functools.cache
def refusals_held() -> RefusalsHeld:
    """This process's count of refusals held."""
    return RefusalsHeld(per_client=REFUSALS_HELD_PER_CLIENT, in_all=REFUSALS_HELD)


class HeldRefusal:
    """A refusal's answer, due :data:`REFUSAL_DELAY_SEC` after the request; its place among
    those held given back as it is sent, or when cancelled (its connection lost first). Cancelled
    as a Twisted ``DelayedCall`` is: :meth:`cancel` while :meth:`active`."""

    def __init__(
        self,
        request: Any,
        refusal: Refusal,
        *,
        client: str,
        held: RefusalsHeld,
        call_later: Callable[..., Any],
    ) -> None:
        self._client = client
        self._held = held
        self._call = call_later(REFUSAL_DELAY_SEC, self._send, request, refusal)

    def _send(self, request: Any, refusal: Refusal) -> None:
        self._held.give_back(self._client)
        refusal_answer(request, refusal, client=self._client, waited=REFUSAL_DELAY_SEC)

    def active(self) -> bool:
        return self._call.active()

    def cancel(self) -> None:
        self._call.cancel()
        self._held.give_back(self._client)


def refusal_send(
    request: Any, refusal: Refusal, *, client: str, call_later: Callable[..., Any]
) -> HeldRefusal | None:
    """Answer the upgrade ``request`` 429 for ``refusal``: after :data:`REFUSAL_DELAY_SEC` (the
    answer held, to be cancelled if the connection is lost first) while the refusals held have
    room for it, else at once (``None``). ``call_later``: the reactor's."""
    held = refusals_held()
    if held.take(client):
        return HeldRefusal(request, refusal, client=client, held=held, call_later=call_later)
    refusal_answer(request, refusal, client=client, waited=0.0)
    return None


@functools.cache
def websocket_admission() -> ConnectionAdmission | None:
    """This process's admission of WebSocket connections; ``None`` when nothing limits them."""
    rate, max_open = settings.WEBSOCKET_CONNECTS_PER_CLIENT, settings.WEBSOCKET_OPEN_PER_CLIENT
    if rate is None and not max_open:
        return None
    return ConnectionAdmission(rate=rate, max_open=max_open or None)


def is_upgrade(request: Any) -> bool:
    """Whether a Twisted request asks for a WebSocket (as daphne tells: its first ``Upgrade``)."""
    upgrade = request.requestHeaders.getRawHeaders(b"upgrade")
    return bool(upgrade) and upgrade[0].lower() == b"websocket"


def request_client(request: Any) -> str:
    """The client address of a Twisted request, as ``core/client_address.py`` reckons it."""
    forwarded_for = b",".join(request.requestHeaders.getRawHeaders(b"x-forwarded-for", []))
    return address_of(getattr(request.client, "host", ""), forwarded_for.decode("latin-1"))


def refusal_answer(request: Any, refusal: Refusal, *, client: str, waited: float) -> None:
    """Answer the upgrade ``request`` 429 for ``refusal``, and close its connection; ``waited``:
    the seconds it was held, for the log."""
    text = (
        f"too many WebSocket connections from {client}: {refusal.why}; "
        f"try again in {refusal.retry_after} s\n"
    ).encode()
    request.channel.persistent = False
    request.setResponseCode(429, b"Too Many Requests")
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    request.setHeader(b"content-length", b"%d" % len(text))
    request.setHeader(b"retry-after", b"%d" % refusal.retry_after)
    request.setHeader(b"connection", b"close")
    request.write(text)
    request.finish()
    peer = request.client
    request.server.log_action(
        "http",
        "complete",
        {
            "path": request.path.decode("latin-1"),
            "status": 429,
            "method": request.method.decode("latin-1"),
            "client": f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}",
            "time_taken": waited,
            "size": len(text),
        },
    )
