"""Learn when a viewer's socket is backed up, so a slow viewer's data is bounded.

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
import socket
from typing import Any

from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

SOCKET_SEND_BUFFER = 256 * 1024
TRANSPORT_BUFFER = 512 * 1024


@implementer(IPushProducer)
class WriteGate:
    def __init__(self, send: Any) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self._request = _daphne_request(send)
        if self._request is not None:
            self._request.registerProducer(self, True)
            _buffers_size(self._request)

    def release(self) -> None:
        """Detach from the request; call before the last write of the response."""
        request, self._request = self._request, None
        if request is not None and getattr(request, "producer", None) is self:
            with contextlib.suppress(Exception):
                request.unregisterProducer()
        self.open.set()

    # IPushProducer, called by Twisted on the event loop's thread.
    def pauseProducing(self) -> None:
        self.open.clear()

    def resumeProducing(self) -> None:
        self.open.set()

    def stopProducing(self) -> None:
        self.open.set()


def _daphne_request(send: Any) -> Any:
    """daphne's ``send`` is ``partial(server.handle_reply, request)``: return that request."""
    args = getattr(send, "args", ())
    request = args[0] if args else None
    return request if hasattr(request, "registerProducer") else None


def _buffers_size(request: Any) -> None:
    transport = getattr(request, "transport", None)
    if transport is None:
        return
    transport.bufferSize = TRANSPORT_BUFFER
    with contextlib.suppress(OSError, AttributeError):
        transport.getHandle().setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SEND_BUFFER)
