"""New WebSocket connections admitted per client address, at the HTTP upgrade.

A WebSocket attacker closed with 1008 at its message budget (``config/websocket_close.py``)
could connect again at once: each handshake, consumer and first status was server work, and
three such from one address held every other request at 2.7 to 13 times its calm latency (issue
47). Here each client address (:func:`config.client_address.address_of`: behind a trusted proxy,
the ``X-Forwarded-For`` hop it saw) has ``WEBSOCKET_CONNECTS_PER_CLIENT`` new connections (a
token bucket, :mod:`core.connection_admission`) and ``WEBSOCKET_OPEN_PER_CLIENT`` open at once,
one process's count.

They are taken in the server (``config/server.py``'s request class), as the upgrade request is
read, before daphne builds a WebSocket protocol or the application is called. Past them, the
upgrade is answered ``429 Too Many Requests`` with ``Retry-After`` and the connection closed: a
browser's WebSocket then fails before it opens (its ``close`` event, code 1006, and no
``open``), and Python's ``websockets`` raises ``InvalidStatus`` with the answer. Nothing of the
WebSocket is made: no handshake, no application, no close. A 1008 close instead would have
needed the whole handshake first, and a browser's page opened it, which the viewer page takes
for a connection that worked.

The answer goes out :data:`REFUSAL_DELAY_SEC` after the request, as ``config/rate_limits.py``'s
gate does: a client that connects again as soon as it is answered then waits that long each
time, a connection held idle meanwhile (Twisted reads no further request on it), so one that
never honours ``Retry-After`` is held to a refusal a second per connection it opens at once.
"""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings

from config.client_address import address_of
from core.connection_admission import ConnectionAdmission, Refusal

REFUSAL_DELAY_SEC = 1.0


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
    """The client address of a Twisted request, as ``config/client_address.py`` reckons it."""
    forwarded_for = b",".join(request.requestHeaders.getRawHeaders(b"x-forwarded-for", []))
    return address_of(getattr(request.client, "host", ""), forwarded_for.decode("latin-1"))


def refusal_answer(request: Any, refusal: Refusal, *, client: str) -> None:
    """Answer the upgrade ``request`` 429 for ``refusal``, and close its connection."""
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
            "time_taken": REFUSAL_DELAY_SEC,
            "size": len(text),
        },
    )
