"""The project's server: daphne, with request bodies capped while they arrive.

daphne (Twisted) receives a whole request body, into memory or a temporary file, before the
application sees any of it, so no code in the application can stop an oversized upload until
all of it has arrived. Here the cap (:func:`edge.body_limit.body_cap`, by the request's path)
sits in daphne's request class instead: a declared ``Content-Length`` over it is answered as soon
as the headers are in (and no ``100 Continue`` is sent), a body without one as soon as it grows
past it. Nothing beyond the cap is kept.

A body the cap admits is kept in its file (a temporary file past 100 KB) until the application
reads it, a piece at a time (:class:`BodyQueue`); Twisted's own parsing of form bodies, which
daphne never uses, is turned off.

After the answer the server goes on reading, and discarding, what the client still sends, for up
to :data:`LINGER_SEC`: a client that writes its whole body before it reads (browsers, most HTTP
libraries) would otherwise meet a reset connection and lose the answer.

The request head is capped too, by Twisted: 16384 bytes for the request line and the headers
together. Twisted drops the connection without a word when one line is longer than that, and
answers an empty ``400`` when the lines add up to more; here (:class:`HeadCappedChannel`) both are
answered with ``414 URI Too Long`` when the request line alone is over, else ``431 Request Header
Fields Too Large``, with a line of text saying so, and the same lingering.

Slow clients are timed out (:class:`HeadCappedChannel`): a head must arrive within
``SERVER_HEAD_TIMEOUT_SEC``, a body keep a byte every ``SERVER_BODY_IDLE_SEC`` and
``SERVER_BODY_MIN_RATE`` bytes a second on average, else 408 and the connection closed.

A request to upgrade to a WebSocket is admitted per client address first
(:mod:`edge.websocket_admission`), before daphne makes a WebSocket of it; past the limits it is
answered 429.

At start, a server that listens beyond this machine while no ``CHANNELS_ADMIN_TOKEN`` is set
says so in its log: the channel admin API then answers only staff logins from elsewhere.

When the server is asked to stop (SIGTERM, SIGINT), the channel hub is closed before the event
loop ends: its upstream connection is hung up and, with several processes, its relay keys are
given back, so another process takes the upstream over within a third of the key's expiry (its
next look at the key) rather than when the key runs out. The apps' background tasks (the
channel schedule's runner), started once the server runs, are cancelled before that, so that the
runner gives its Redis lease back too.

Run it as daphne, with daphne's options: ``python -m edge.server -b HOST -p PORT
config.asgi:application``.
"""

from __future__ import annotations

import asyncio
import functools
import io
import ipaddress
import logging
import os
import re
import sys
from typing import Any

import daphne.server
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from django.conf import settings
from twisted.internet import defer, reactor
from twisted.web import http

from core.edge_registry import background_tasks, shutdown_hooks
from core.malloc import malloc_arenas_limit
from edge.body_limit import DrainPace, body_cap, body_refusal
from edge.websocket_admission import (
    is_upgrade,
    refusal_send,
    request_client,
    websocket_admission,
)
from edge.websocket_close import EndpointCloseFactory

logger = logging.getLogger(__name__)

LINGER_SEC = 30
# A refused body is still read, and dropped, until the client has sent it (LINGER_SEC at most),
# so that the client reads the answer rather than a reset: read 256 KB at a time rather than
# Twisted's 64 KB, it cost the event loop 21 ms for each 70 MB refused rather than 50-60 (4 MB:
# 78, each read a new map): benchmarks/refused_body.py.
REFUSED_READ_BYTES = 2**18
# How long a connection timed out may take to close before it is cut.
CLOSE_SEC = 5
# The longest the apps' shutdown hooks may take at shutdown (the hub's, with an unreachable Redis,
# say).
SHUTDOWN_HOOKS_SEC = 5


@functools.cache
def drain_pace() -> DrainPace:
    """The pace of this process's refused bodies, from the settings on first use."""
    return DrainPace(rate=settings.SERVER_REFUSED_DRAIN_MB * 2**20)


class CappedRequest(WebRequest):
    """daphne's request, refusing a body over the cap while it arrives."""

    _received = 0
    _refused = False
    _cap = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Twisted would parse a form's whole body in memory, in the event loop, for request.args
        # that daphne never reads: one 69 MB upload took 770 MB and 3 s of the loop.
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    def gotLength(self, length: int | None) -> None:
        # the head is in, none of the body: the request line names the path, and so the cap
        self._cap = body_cap(self._request_path())
        if length is not None and length > self._cap:
            self._refuse(size=length)
        else:
            super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:  # dropped, at the pace of refused bodies
            pause = drain_pace().take(len(data))
            if pause > 0:
                transport = self.channel.transport
                transport.pauseProducing()
                self._paused = reactor.callLater(pause, transport.resumeProducing)
            return
        self._received += len(data)
        if self._received > self._cap:
            self._refuse(size=self._received)
        else:
            super().handleContentChunk(data)

    def _request_path(self) -> str:
        """The path of the request line, parsed by the channel but not yet handed to the request
        (that happens once the body is in)."""
        return getattr(self.channel, "_path", b"/").split(b"?", 1)[0].decode("latin-1")

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if self._refused:
            # The client has sent all of it: the answer is out, nothing is left to wait for.
            self.channel.transport.loseConnection()
        else:
            super().requestReceived(command, path, version)

    def process(self) -> Any:
        admission = websocket_admission()
        if admission is None or not is_upgrade(self):
            return super().process()
        client = request_client(self)
        refusal = admission.admit(client)
        if refusal is not None:  # answered later (cancelled in connectionLost), or now
            self._refusal = refusal_send(self, refusal, client=client, call_later=reactor.callLater)
            return None
        # daphne builds the connection's WebSocket protocol within this call (the upgrade waits
        # for nothing), and the factory hands it the client, whose count it ends when it closes
        factory = self.server.ws_factory
        factory.upgrading_client = client
        try:
            return super().process()
        finally:
            if factory.upgrading_client is not None:  # daphne answered the request itself (400)
                admission.release(client)
                factory.upgrading_client = None

    def _refuse(self, *, size: int) -> None:
        self._refused = True
        if getattr(self, "content", None) is not None:
            self.content.close()
        self.content = io.BytesIO()
        # The answer goes out now; asking the client for its body would contradict it.
        self.requestHeaders.removeHeader(b"expect")
        channel = self.channel
        method = getattr(channel, "_command", b"POST").decode("latin-1")
        path = self._request_path()
        headers = [
            (name, value)
            for name, values in self.requestHeaders.getAllRawHeaders()
            for value in values
        ]
        response = body_refusal(method=method, path=path, headers=headers, size=size)
        channel.persistent = False
        transport = channel.transport
        transport.write(
            b"HTTP/1.1 %d %s\r\n" % (response.status_code, response.reason_phrase.encode())
            + response.serialize_headers()
            + b"\r\n\r\n"
            + response.content
        )
        transport.loseWriteConnection()
        transport.bufferSize = REFUSED_READ_BYTES
        peer = transport.getPeer()
        self.server.log_action(
            "http",
            "complete",
            {
                "path": path,
                "status": response.status_code,
                "method": method,
                "client": f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}",
                "time_taken": 0,
                "size": len(response.content),
            },
        )
        self._linger = reactor.callLater(LINGER_SEC, transport.abortConnection)

    def connectionLost(self, reason: Any) -> None:
        timers = ("_linger", "_refusal", "_paused")
        for timer in (getattr(self, name, None) for name in timers):
            if timer is not None and timer.active():
                timer.cancel()
        super().connectionLost(reason)


# A header field's name is a token followed by ":"; a request line's method, a token followed by a
# space. A line folded onto the previous header starts with a space or a tab.
HEADER_LINE = re.compile(rb"[ \t]|[!#$%&'*+.^_`|~0-9A-Za-z-]+:")
HEAD_REFUSAL = (
    b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
)


class HeadCappedChannel(http.HTTPChannel):
    """Twisted's HTTP/1.1 connection, with its request heads capped and its reads timed.

    A head over its cap is answered (Twisted drops the connection for a line over
    ``MAX_LENGTH`` and answers an empty 400 for lines over ``totalHeadersSize`` or headers over
    ``maxHeaders``): 414 for a request line over 16384 bytes, else 431 for the lines over 16384
    bytes together, counted as they arrive (with their line ends, and lines folded onto a header
    counted as any other: Twisted counts neither), or for over 500 lines of headers.

    A head must arrive whole within ``SERVER_HEAD_TIMEOUT_SEC`` of the connection's start or the
    previous response's end, and a body must bring a byte every ``SERVER_BODY_IDLE_SEC`` and
    keep ``SERVER_BODY_MIN_RATE`` bytes a second on average (after a first
    ``SERVER_BODY_IDLE_SEC``); past either the request is answered 408 and the connection
    closed. A connection that sent nothing of a next request is closed without a word. While
    the application answers (a stream, a WebSocket) no clock runs."""

    _head_refused = False
    _head_started = False
    _head_timer: Any = None
    _body_timer: Any = None
    _body_start = 0.0
    _body_last = 0.0
    _body_received = 0
    _head_bytes = 0
    _head_lines = 0

    def connectionMade(self) -> None:
        super().connectionMade()
        self._head_wait()

    def dataReceived(self, data: bytes) -> None:
        if self._head_refused:
            return
        if self._head_timer is not None:
            self._head_started = True
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        if self._head_refused:
            return  # lines already buffered when the head was refused
        # a closing connection ignores lines (Twisted's own rule)
        if self.persistent:
            self._head_bytes += len(line) + len(self.delimiter)
            self._head_lines += bool(line)  # the empty line that ends a head is no header
            if self._head_bytes > self.totalHeadersSize:
                self._refuse_head(line)
                return
            # the request line, then the header lines
            if self._head_lines > self.maxHeaders + 1:
                self._refuse_head(line, lines=True)
                return
        super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        self._refuse_head(line)

    def allHeadersReceived(self) -> None:
        self._head_timer_stop()
        self._head_bytes = self._head_lines = 0
        super().allHeadersReceived()
        if self.length != 0 and not self._head_refused:  # a body follows
            self._body_start = self._body_last = reactor.seconds()
            self._body_received = 0
            self._body_timer = reactor.callLater(self.factory.body_idle, self._body_timed_out)

    def rawDataReceived(self, data: bytes) -> None:
        if self._body_timer is not None:
            self._body_received += len(data)
            now = self._body_last = reactor.seconds()
            deadline = now + self.factory.body_idle
            if self.factory.body_min_rate:
                deadline = min(
                    deadline,
                    self._body_start
                    + self.factory.body_idle
                    + self._body_received / self.factory.body_min_rate,
                )
            self._body_timer.reset(max(deadline - now, 0))
        super().rawDataReceived(data)

    def allContentReceived(self) -> None:
        self._body_timer_stop()
        super().allContentReceived()

    def requestDone(self, request: Any) -> None:
        if self.persistent:
            # before Twisted reads on: a next request's head buffered meanwhile stops the clock
            self._head_wait()
        super().requestDone(request)

    def _head_wait(self) -> None:
        self._head_timer_stop()
        self._head_started = False
        self._head_bytes = self._head_lines = 0
        self._head_timer = reactor.callLater(self.factory.head_timeout, self._head_timed_out)

    def _head_timer_stop(self) -> None:
        if self._head_timer is not None and self._head_timer.active():
            self._head_timer.cancel()
        self._head_timer = None

    def _body_timer_stop(self) -> None:
        if self._body_timer is not None and self._body_timer.active():
            self._body_timer.cancel()
        self._body_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._head_started:  # idle between requests, or never a byte: nothing to answer
            self._head_refused = True
            self.transport.loseConnection()
            return
        text = b"the request head did not arrive within %d s\n" % self.factory.head_timeout
        self._time_out(text)

    def _body_timed_out(self) -> None:
        self._body_timer = None
        request = self.requests[-1] if self.requests else None
        if getattr(request, "_refused", False):  # answered already (413): only the close is left
            self._head_refused = True
            self.transport.abortConnection()
            return
        if reactor.seconds() - self._body_last >= self.factory.body_idle - 0.01:
            text = b"the request body stalled: no byte for %d s\n" % self.factory.body_idle
        else:
            text = b"the request body arrived slower than %d bytes a second\n" % (
                self.factory.body_min_rate
            )
        self._time_out(text)

    def _time_out(self, text: bytes) -> None:
        self._head_refused = True
        self.persistent = False
        method, target = getattr(self, "_command", b"-"), getattr(self, "_path", b"-")
        self._answer(408, b"Request Timeout", text, method=method, target=target)
        self.transport.loseConnection()
        self._linger = reactor.callLater(CLOSE_SEC, self.transport.abortConnection)

    def _refuse_head(self, line: bytes, *, lines: bool = False) -> None:
        self._head_refused = True
        self._head_timer_stop()
        if lines:
            status, reason = 431, b"Request Header Fields Too Large"
            text = b"the request has over %d header lines\n" % self.maxHeaders
            method, target = getattr(self, "_command", b"-"), getattr(self, "_path", b"-")
        elif HEADER_LINE.match(line):
            status, reason = 431, b"Request Header Fields Too Large"
            text = b"the request line and headers are over %d bytes together\n" % (
                self.totalHeadersSize
            )
            method, target = getattr(self, "_command", b"-"), getattr(self, "_path", b"-")
        else:
            status, reason = 414, b"URI Too Long"
            text = b"the request line is over %d bytes\n" % self.totalHeadersSize
            method, _, target = line.partition(b" ")
        self._answer(status, reason, text, method=method, target=target)
        self.transport.loseWriteConnection()
        self._linger = reactor.callLater(LINGER_SEC, self.transport.abortConnection)

    def _answer(
        self, status: int, reason: bytes, text: bytes, *, method: bytes, target: bytes
    ) -> None:
        """Write a plain-text answer made here, and its line in the access log: what the request
        was, not all of it."""
        method = method[:20]
        path = target if len(target) <= 80 else target[:80] + b"..."
        transport = self.transport
        transport.write(HEAD_REFUSAL % (status, reason, len(text), text))
        peer = transport.getPeer()
        self.factory.server.log_action(
            "http",
            "complete",
            {
                "path": path.decode("latin-1"),
                "status": status,
                "method": method.decode("latin-1"),
                "client": f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}",
                "time_taken": 0,
                "size": len(text),
            },
        )

    def connectionLost(self, reason: Any) -> None:
        self._head_timer_stop()
        self._body_timer_stop()
        linger = getattr(self, "_linger", None)
        if linger is not None and linger.active():
            linger.cancel()
        super().connectionLost(reason)


# What the application is handed of a request body at a time.
BODY_PIECE = 64 * 1024
_BODY = object()  # in a request's queue: the next piece of its body, read when taken


class BodyQueue(asyncio.Queue):
    """The queue of one HTTP request's ASGI messages, leaving its body in the request's file
    until the application asks for it.

    daphne puts a whole body into the application's queue at once, in pieces of 8 KB: six
    parallel 69 MB uploads held 50,000 pieces in memory (1.4 GB at the peak), and what they left
    behind stayed with the process (600 MB over its size before). Here a body is one marker
    in the queue, and each piece is read from the file (a temporary file past 100 KB) when the
    application takes it."""

    def __init__(self, request: WebRequest) -> None:
        super().__init__()
        self._request = request
        self._offset: int | None = None  # where the next piece starts; None before the body

    def put_nowait(self, message: Any) -> None:
        if message["type"] != "http.request":
            super().put_nowait(message)
        elif self._offset is None:
            self._offset = 0
            super().put_nowait(_BODY)
        # daphne's further pieces are read again from the file, when asked for

    async def get(self) -> Any:
        message = await super().get()
        if message is not _BODY:
            return message
        try:
            content = self._request.content
            content.seek(self._offset)
            piece = content.read(BODY_PIECE)
        except (AttributeError, ValueError):  # the request is over, its file closed
            return {"type": "http.disconnect"}
        self._offset += len(piece)
        more = len(piece) == BODY_PIECE
        if more:
            super().put_nowait(_BODY)
        return {"type": "http.request", "body": piece, "more_body": more}


class BodyOnDemandServer(daphne.server.Server):
    """daphne's server, handing each HTTP request's application a :class:`BodyQueue`."""

    def create_application(self, protocol: Any, scope: dict) -> asyncio.Queue | None:
        if scope["type"] != "http":
            return super().create_application(protocol, scope)
        # daphne's own, but for the queue
        queue = BodyQueue(protocol)
        scope.setdefault("asgi", {"version": "3.0"})
        instance = self.application(
            scope=scope, receive=queue.get, send=functools.partial(self.handle_reply, protocol)
        )
        if protocol not in self.connections:
            return None
        self.connections[protocol]["application_instance"] = asyncio.ensure_future(instance)
        return queue


class CappedHTTPFactory(HTTPFactory):
    def __init__(self, server: Any) -> None:
        super().__init__(server)
        self.head_timeout = settings.SERVER_HEAD_TIMEOUT_SEC
        self.body_idle = settings.SERVER_BODY_IDLE_SEC
        self.body_min_rate = settings.SERVER_BODY_MIN_RATE

    def protocol(self) -> Any:
        """Twisted's factory hook for a connection's protocol: its proxy that speaks HTTP/1.1 or,
        if negotiated, HTTP/2, holding our HTTP/1.1 channel."""
        return http._GenericHTTPChannelProtocol(HeadCappedChannel())

    def buildProtocol(self, addr: Any) -> http.HTTPChannel:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = CappedRequest
        return protocol


_running_tasks: list[asyncio.Task[None]] = []
BACKGROUND_STOP_SEC = 2.0  # the most the apps' background tasks may take to end at shutdown


def _apps_background_start() -> None:
    """The apps' background tasks (core/edge_registry.py: the channel schedule's runner), each
    on the event loop until the server stops; one that fails is logged."""
    for task in background_tasks():
        running = asyncio.ensure_future(task())
        running.add_done_callback(_background_ended)
        _running_tasks.append(running)


def _background_ended(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("a background task failed", exc_info=task.exception())


def _apps_shut_down() -> defer.Deferred:
    """The apps' background tasks cancelled and ended, then their shutdown hooks
    (core/edge_registry.py: the channel hub's), awaited together."""

    async def hooks_run() -> None:
        for task in _running_tasks:
            task.cancel()
        if _running_tasks:
            # bounded: one that does not end in time must not keep the hub from closing
            await asyncio.wait(_running_tasks, timeout=BACKGROUND_STOP_SEC)
        await asyncio.gather(*(hook() for hook in shutdown_hooks()))

    closing = asyncio.wait_for(hooks_run(), SHUTDOWN_HOOKS_SEC)
    return defer.Deferred.fromFuture(asyncio.ensure_future(closing))


def listening_warning(host: str | None, *, token: str) -> str | None:
    """What to warn of when the server listens on ``host`` (``None``: daphne's default,
    loopback) with the admin token ``token``; ``None`` when all is well."""
    if token or host is None:
        return None
    try:
        if ipaddress.ip_address(host.strip("[]")).is_loopback:
            return None
    except ValueError:
        if host == "localhost":
            return None
    return (
        f"listening on {host} with no CHANNELS_ADMIN_TOKEN: the channel admin API admits only "
        "staff logins and requests made on this machine (not through a proxy); set "
        "CHANNELS_ADMIN_TOKEN to use it from elsewhere"
    )


def _warn_of_listening(argv: list[str]) -> None:
    arguments, _ = CommandLineInterface().parser.parse_known_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    warning = listening_warning(arguments.host, token=settings.CHANNELS_ADMIN_TOKEN)
    if warning:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logger.warning(warning)


def main() -> None:
    # Before any thread allocates: one arena, whose free memory malloc_trim can return
    # (core/malloc.py), rather than one for each thread that an export or import runs in.
    malloc_arenas_limit(arenas=1)
    _warn_of_listening(sys.argv[1:])
    reactor.callWhenRunning(_apps_background_start)
    reactor.addSystemEventTrigger("before", "shutdown", _apps_shut_down)
    # daphne builds its HTTP factory from this module-level name, and has no other way to be
    # given a request class.
    daphne.server.HTTPFactory = CappedHTTPFactory
    daphne.server.WebSocketFactory = EndpointCloseFactory  # the same, for close codes
    CommandLineInterface.server_class = BodyOnDemandServer
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
