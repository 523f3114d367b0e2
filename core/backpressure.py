"""Learn when a client's socket is backed up: a slow viewer's data is bounded (``/ts``), and a
stream computed as it is read runs at its reader's pace (:class:`PacedStreams`).

ASGI servers differ here: uvicorn's ``send`` waits while the client's socket is full, but
daphne's returns at once and Twisted buffers without limit. On daphne we register a Twisted push
producer on the request, which Twisted pauses when its buffer for the socket fills and resumes
once that buffer has drained; :attr:`WriteGate.open` follows it. The stream consumer drops the
chunks that come while the gate is shut instead of waiting for it: a waiting writer would only
refill the buffer a loop iteration after Twisted emptied it, leaving the socket idle in between,
and with thousands of viewers an iteration is long.

Twisted pauses its producer once its own buffer holds more than 64 KiB, which one chunk of a
busy stream already does. The gate raises that threshold to :data:`TRANSPORT_BUFFER`, so only a
viewer that really falls behind (about a second at 4 Mbit/s) loses data.
The kernel's own send buffer grows by autotuning to megabytes (seconds of video) for a viewer
that reads nothing, so the gate also fixes it at :data:`SOCKET_SEND_BUFFER`: enough for a
fast viewer (256 KiB per 100 ms of round trip carries 20 Mbit/s), small enough to keep a slow
one near the live edge.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from typing import Any

from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

SOCKET_SEND_BUFFER = 256 * 1024
TRANSPORT_BUFFER = 512 * 1024
STALLED_CLIENT_SEC = 60.0


@implementer(IPushProducer)
class WriteGate:
    def __init__(
        self,
        send: Any,
        *,
        transport_buffer: int = TRANSPORT_BUFFER,
        socket_buffer: int = SOCKET_SEND_BUFFER,
    ) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self.shut_since: float | None = None  # when the socket last backed up, while it is
        self._request = _daphne_request(send)
        if self._request is not None:
            self._request.registerProducer(self, True)
            _buffers_size(self._request, transport_buffer, socket_buffer)

    def release(self) -> None:
        """Detach from the request; call before the last write of the response."""
        request, self._request = self._request, None
        if request is not None and getattr(request, "producer", None) is self:
            with contextlib.suppress(Exception):
                request.unregisterProducer()
        self.open.set()

    def abort(self) -> bool:
        """Drop the connection and what is still buffered for it, instead of ending the
        response; False where the server offers no way to (then end it as usual)."""
        request = self._request
        self.release()
        transport = getattr(request, "transport", None)
        if transport is None or not hasattr(transport, "abortConnection"):
            return False
        transport.abortConnection()
        return True

    # IPushProducer, called by Twisted on the event loop's thread.
    def pauseProducing(self) -> None:
        self.open.clear()
        self.shut_since = time.monotonic()

    def resumeProducing(self) -> None:
        self.open.set()
        self.shut_since = None

    def stopProducing(self) -> None:
        self.open.set()
        self.shut_since = None


def _daphne_request(send: Any) -> Any:
    """daphne's ``send`` is ``partial(server.handle_reply, request)``: return that request,
    while its connection lasts. A client may hang up (or reset) before the response's first
    write; its request has no channel then, daphne drops what is sent to it, and there is no
    socket to pace."""
    args = getattr(send, "args", ())
    request = args[0] if args else None
    if not hasattr(request, "registerProducer") or getattr(request, "channel", None) is None:
        return None
    return request


def _buffers_size(request: Any, transport_buffer: int, socket_buffer: int) -> None:
    transport = getattr(request, "transport", None)
    if transport is None:
        return
    transport.bufferSize = transport_buffer
    with contextlib.suppress(OSError, AttributeError):
        transport.getHandle().setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, socket_buffer)


class PacedStreams:
    """ASGI middleware: the response body of a request to one of ``paths`` is sent a part at
    a time, each once the client's socket has room (a :class:`WriteGate`), instead of being
    buffered whole for a client that reads slowly. A view that computes its parts as they are
    asked for, as ``/propagate_in_video`` and the streamed exports do, then runs at its
    client's pace: in this process
    the engine waits, and with inference workers the stream's credits stop its worker."""

    def __init__(
        self,
        app: Any,
        paths: frozenset[str],
        path_pattern: re.Pattern[str] | None = None,
        **buffers: int,
    ) -> None:
        self._app = app
        self._paths = paths
        self._path_pattern = path_pattern  # more paths, by a pattern they match in full
        self._buffers = buffers

    def _paced(self, path: str) -> bool:
        if path in self._paths:
            return True
        return self._path_pattern is not None and self._path_pattern.fullmatch(path) is not None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self._paced(scope["path"]):
            await self._app(scope, receive, send)
            return
        gate: WriteGate | None = None

        async def paced(message: dict) -> None:
            nonlocal gate
            if message["type"] == "http.response.body" and message.get("more_body"):
                if gate is None:
                    gate = WriteGate(send, **self._buffers)
                # A client that reads nothing for this long is given up (the stream ends).
                await asyncio.wait_for(gate.open.wait(), STALLED_CLIENT_SEC)
            elif message["type"] == "http.response.body" and gate is not None:
                gate.release()  # before the last part, as the gate asks
            await send(message)

        try:
            await self._app(scope, receive, paced)
        finally:
            if gate is not None:
                gate.release()
