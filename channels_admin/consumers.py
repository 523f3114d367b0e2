"""Async consumers: the shared MPEG-TS stream at /ts, its HLS output at /hls/, the built-in
demo channels, and the status feed the viewer page listens to. While the stream is private,
each takes the viewer link's token from the query (``?t=TOKEN``), and a segment its signature
(``services/viewer_links.py``, ``streaming/segment_signature.py``)."""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from channels_admin.selectors import viewer_status
from channels_admin.services.demo_streams import DemoStream, demo_stream_start, demo_stream_stop
from channels_admin.services.refusal import Refusal
from channels_admin.services.status import STATUS_GROUP
from channels_admin.services.viewer_links import viewer_access_check
from channels_admin.services.viewers import (
    hls_playlist,
    hls_segment,
    status_feed_hold,
    status_feed_release,
    viewer_counts,
    viewer_join,
    viewer_leave,
)
from core.backpressure import WriteGate
from core.cancellation import task_cancel
from core.client_address import address_of

logger = logging.getLogger(__name__)

TS_HEADERS = [
    (b"Content-Type", b"video/mp2t"),
    (b"Cache-Control", b"no-cache"),
    (b"Access-Control-Allow-Origin", b"*"),
]
TEXT = (b"Content-Type", b"text/plain; charset=utf-8")
ANY_ORIGIN = (b"Access-Control-Allow-Origin", b"*")
# A segment's name is never used for other bytes, so caches may keep it; the playlist changes
# every segment, and a cache in front refreshes it within a second.
PLAYLIST_HEADERS = [
    (b"Content-Type", b"application/vnd.apple.mpegurl"),
    (b"Cache-Control", b"public, max-age=1"),
    ANY_ORIGIN,
]
# A capped link's playlist: each client's reloads must reach the origin, which counts them.
UNSHARED_PLAYLIST_HEADERS = [
    (b"Content-Type", b"application/vnd.apple.mpegurl"),
    (b"Cache-Control", b"private, no-store"),
    ANY_ORIGIN,
]
SEGMENT_HEADERS = [
    (b"Content-Type", b"video/mp2t"),
    (b"Cache-Control", b"public, max-age=3600, immutable"),
    ANY_ORIGIN,
]
HLS_ERROR_HEADERS = [TEXT, (b"Cache-Control", b"no-store"), ANY_ORIGIN]

# The status feed's close when its viewer link no longer admits viewers: a code of the
# application's own (4000 to 4999, RFC 6455), 4403 after HTTP's 403 that a new handshake gets.
LINK_LOST_CLOSE = 4403

NextChunk = Callable[[], Awaitable[bytes | None]]
# More query fields than a signed segment URI has: the query is then not read at all.
QUERY_MAX_FIELDS = 8


def query_params(scope: dict) -> dict[str, str]:
    """The request's query parameters (the first value of each); none past
    ``QUERY_MAX_FIELDS`` fields."""
    try:
        pairs = parse_qsl(
            scope.get("query_string", b"").decode("latin-1"), max_num_fields=QUERY_MAX_FIELDS
        )
    except ValueError:
        return {}
    params: dict[str, str] = {}
    for name, value in pairs:
        params.setdefault(name, value)
    return params


def viewer_token(scope: dict) -> str:
    """The viewer link's token the request carries (``?t=``); "" for none."""
    return query_params(scope).get("t", "")


def refusal_headers(refusal: Refusal) -> list[tuple[bytes, bytes]]:
    headers = [TEXT, (b"Cache-Control", b"no-store")]
    if refusal.retry_after_sec is not None:
        headers.append((b"Retry-After", str(refusal.retry_after_sec).encode()))
    return headers


class StreamingConsumer(AsyncHttpConsumer, abc.ABC):
    """A GET that answers with an endless body, written by a separate task.

    The task leaves this consumer free to receive ASGI messages, so a viewer's disconnect is
    seen (and its resources freed) at once. Subclasses implement :meth:`open_stream`.

    What :meth:`open_stream` took is given back (:meth:`close_stream`) however the connection
    ends: the client hangs up or resets it (even before the response's first byte), the stream
    ends, the server cuts the client off, or the server cancels the application. A client whose
    socket takes nothing for :attr:`stalled_after_sec` is cut off: its connection costs the
    server a writer and its buffers, and reading nothing it watches nothing.
    """

    # Fed directly, not through the channel layer: no per-viewer layer channel.
    channel_layer_alias = None
    writer: asyncio.Task[None] | None = None

    @property
    def stalled_after_sec(self) -> float:
        return settings.CHANNELS_STALLED_VIEWER_SEC

    @abc.abstractmethod
    async def open_stream(self) -> NextChunk | None:
        """A coroutine function giving the body's next chunk (None at its end); or None after
        answering with an error response."""

    async def close_stream(self) -> None:
        """Free what :meth:`open_stream` took; called at least once when the response ends, so
        it frees only what is still held."""

    def chunk_skipped(self, size: int, *, since: float) -> None:
        """A chunk of ``size`` bytes was not sent: the client's socket has been backed up since
        ``since`` (monotonic)."""

    def socket_drained(self) -> None:
        """The client's socket, backed up, takes data again."""

    def cut_off(self) -> bool:
        """Whether the stream ended because the server cannot carry this client: then the
        connection is dropped with what is still buffered for it, which would cost the server
        the time it is short of."""
        return False

    async def __call__(self, scope: dict, receive: object, send: object) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._end()

    async def http_request(self, message: dict) -> None:
        if message.get("more_body"):
            return
        if self.scope["method"] != "GET":
            await self.send_response(405, b"method not allowed", headers=[TEXT, (b"Allow", b"GET")])
            raise StopConsumer()
        next_chunk = await self.open_stream()
        if next_chunk is None:
            raise StopConsumer()
        await self.send_headers(status=200, headers=TS_HEADERS)
        self.writer = asyncio.create_task(self._write(next_chunk))

    async def _write(self, next_chunk: NextChunk) -> None:
        # The innermost loop of the fan-out, run per viewer per chunk: kept to the fewest awaits.
        send = self.base_send
        gate = WriteGate(send)
        writable = gate.open.is_set
        backed_up = False
        try:
            while (data := await next_chunk()) is not None:
                # A viewer whose socket is backed up loses this chunk rather than the writer
                # waiting: waiting leaves its socket idle between draining and the next write.
                if writable():
                    if backed_up:
                        backed_up = False
                        self.socket_drained()
                    await send({"type": "http.response.body", "body": data, "more_body": True})
                    continue
                backed_up, now = True, time.monotonic()
                since = gate.shut_since or now
                if now - since > self.stalled_after_sec and gate.abort():
                    logger.info(
                        "%s: cut off a client that read nothing for %.0f s",
                        self.scope["path"],
                        self.stalled_after_sec,
                    )
                    return
                self.chunk_skipped(len(data), since=since)
            if self.cut_off() and gate.abort():
                return
        finally:
            gate.release()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def disconnect(self) -> None:
        await self._end()

    async def _end(self) -> None:
        """Stop the writer and free the stream's resources; once is enough, more is harmless."""
        writer, self.writer = self.writer, None
        try:
            await task_cancel(writer)
        finally:
            await self.close_stream()


class TransportStreamConsumer(StreamingConsumer):
    """``GET /ts``: the active channel's bytes, until the channel changes (then the response
    ends and players rebuild for the new stream)."""

    subscription = None

    async def open_stream(self) -> NextChunk | None:
        joined = await viewer_join(token=viewer_token(self.scope))
        if isinstance(joined, Refusal):
            await self.send_response(
                joined.status, joined.reason.encode(), headers=refusal_headers(joined)
            )
            return None
        self.subscription = joined
        return joined.next_data

    async def close_stream(self) -> None:
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            await viewer_leave(subscription=subscription)

    def chunk_skipped(self, size: int, *, since: float) -> None:
        self.subscription.skipped(size, since=since)

    def socket_drained(self) -> None:
        self.subscription.drained()

    def cut_off(self) -> bool:
        return self.subscription.cut_off


class DemoChannelConsumer(StreamingConsumer):
    """``GET /tv/demo/<n>.ts``: a live test pattern encoded here, so the default playlist
    plays with no internet. Encoders are capped in all and per client, as each costs a share
    of a core (``services/demo_streams.py``)."""

    stream: DemoStream | None = None

    async def open_stream(self) -> NextChunk | None:
        started = demo_stream_start(
            number=self.scope["url_route"]["kwargs"]["number"], client=scope_client(self.scope)
        )
        if isinstance(started, Refusal):
            retry = str(started.retry_after_sec).encode()
            await self.send_response(
                503, started.reason.encode(), headers=[TEXT, (b"Retry-After", retry)]
            )
            return None
        self.stream = started
        return started.next_chunk

    async def close_stream(self) -> None:
        stream, self.stream = self.stream, None
        if stream is not None:
            demo_stream_stop(stream=stream)


def scope_client(scope: dict) -> str:
    """The client's address (``core/client_address.py``) from an ASGI scope."""
    peer = (scope.get("client") or ("",))[0]
    forwarded_for = b",".join(
        value for name, value in scope.get("headers", ()) if name == b"x-forwarded-for"
    )
    return address_of(peer, forwarded_for.decode("latin-1"))


class HlsConsumer(AsyncHttpConsumer, abc.ABC):
    """A GET (or HEAD) of the HLS output: one whole answer, no state kept per client."""

    channel_layer_alias = None

    @abc.abstractmethod
    async def answer(self) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The status, headers and body."""

    async def handle(self, body: bytes) -> None:
        method = self.scope["method"]
        if method not in ("GET", "HEAD"):
            await self.send_response(
                405, b"method not allowed", headers=[TEXT, (b"Allow", b"GET, HEAD")]
            )
            return
        status, headers, content = await self.answer()
        headers = [*headers, (b"Content-Length", str(len(content)).encode())]
        await self.send_response(status, b"" if method == "HEAD" else content, headers=headers)


class HlsPlaylistConsumer(HlsConsumer):
    """``GET /hls/live.m3u8``: the active channel's live playlist; 503 with the reason (and
    ``Retry-After``) while no channel is selected or its first segment is not ready."""

    async def answer(self) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        playlist = await hls_playlist(
            token=viewer_token(self.scope), client=scope_client(self.scope)
        )
        if isinstance(playlist, Refusal):
            return playlist.status, hls_refusal_headers(playlist), playlist.reason.encode()
        headers = PLAYLIST_HEADERS if playlist.shared else UNSHARED_PLAYLIST_HEADERS
        return 200, headers, playlist.body


class HlsSegmentConsumer(HlsConsumer):
    """``GET /hls/<segment>.ts``: a segment the playlist lists (or listed a moment ago); while
    the stream is private, with the signature the playlist gave it."""

    async def answer(self) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        name = self.scope["url_route"]["kwargs"]["name"]
        data = hls_segment(name=name, query=query_params(self.scope))
        if data is None:
            return 404, HLS_ERROR_HEADERS, b"segment not found"
        if isinstance(data, Refusal):
            return data.status, hls_refusal_headers(data), data.reason.encode()
        return 200, SEGMENT_HEADERS, data


def hls_refusal_headers(refusal: Refusal) -> list[tuple[bytes, bytes]]:
    headers = list(HLS_ERROR_HEADERS)
    if refusal.retry_after_sec is not None:
        headers.append((b"Retry-After", str(refusal.retry_after_sec).encode()))
    return headers


class StatusConsumer(AsyncJsonWebsocketConsumer):
    """``ws /ws/tv/status``: the stream status, pushed on every change; read-only.

    A client may send ``{"type": "refresh"}`` to get the status (with the current channel's
    playlist details) again; the viewer page does so hourly. Past ``WEBSOCKET_MESSAGE_BUDGET``
    the server closes the connection with 1008 before the message reaches this consumer
    (``edge/websocket_close.py``). While the stream is private, the handshake needs a viewer
    link's token (``?t=``), else it is refused (403): the status names the channel. When the
    link it was opened with no longer admits viewers (revoked, expired; or the stream turned
    private and it came without one), the server closes it with :data:`LINK_LOST_CLOSE`."""

    link: int | None = None  # the viewer link it was opened with (runtime.AccessHolder)
    held = False

    async def connect(self) -> None:
        access = await database_sync_to_async(viewer_access_check)(token=viewer_token(self.scope))
        if isinstance(access, Refusal):
            await self.close()
            return
        self.link = access.link
        status_feed_hold(feed=self)
        self.held = True
        await self.channel_layer.group_add(STATUS_GROUP, self.channel_name)
        await self.accept()
        await self._send_status()

    async def access_lost(self) -> None:
        await self.close(code=LINK_LOST_CLOSE)

    async def disconnect(self, code: int) -> None:
        if self.held:
            self.held = False
            status_feed_release(feed=self)
        await self.channel_layer.group_discard(
            STATUS_GROUP, self.channel_name
        )  # (harmless unjoined)

    async def receive_json(self, content: object, **kwargs: object) -> None:
        if isinstance(content, dict) and content.get("type") == "refresh":
            await self._send_status()

    async def status_changed(self, event: dict) -> None:
        await self._send_status()

    async def _send_status(self) -> None:
        status = await database_sync_to_async(viewer_status)()
        await self.send_json({**status, **await viewer_counts()})
