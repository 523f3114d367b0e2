"""Async consumers: the shared MPEG-TS stream at /ts, the built-in demo channels, and the
status feed the viewer page listens to."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import functools
import threading
from collections.abc import Awaitable, Callable
from typing import ClassVar

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from channels_admin.selectors import viewer_counts, viewer_status
from channels_admin.services.status import STATUS_GROUP
from channels_admin.services.viewers import Refusal, viewer_join, viewer_leave
from channels_admin.streaming.demo_encoder import PatternOptions, demo_chunks
from core.backpressure import WriteGate
from core.threads import iterate_in_thread

TS_HEADERS = [
    (b"Content-Type", b"video/mp2t"),
    (b"Cache-Control", b"no-cache"),
    (b"Access-Control-Allow-Origin", b"*"),
]
TEXT = (b"Content-Type", b"text/plain; charset=utf-8")

NextChunk = Callable[[], Awaitable[bytes | None]]


class StreamingConsumer(AsyncHttpConsumer, abc.ABC):
    """A GET that answers with an endless body, written by a separate task.

    The task leaves this consumer free to receive ASGI messages, so a viewer's disconnect is
    seen (and its resources freed) at once. Subclasses implement :meth:`open_stream`.
    """

    # Fed directly, not through the channel layer: no per-viewer layer channel.
    channel_layer_alias = None
    writer: asyncio.Task[None] | None = None

    @abc.abstractmethod
    async def open_stream(self) -> NextChunk | None:
        """A coroutine function giving the body's next chunk (None at its end); or None after
        answering with an error response."""

    async def close_stream(self) -> None:
        """Free what :meth:`open_stream` took; called once when the response ends."""

    def chunk_skipped(self, size: int) -> None:
        """A chunk of ``size`` bytes was not sent: the client's socket was backed up."""

    def cut_off(self) -> bool:
        """Whether the stream ended because the server cannot carry this client: then the
        connection is dropped with what is still buffered for it, which would cost the server
        the time it is short of."""
        return False

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
        try:
            while (data := await next_chunk()) is not None:
                # A viewer whose socket is backed up loses this chunk rather than the writer
                # waiting: waiting leaves its socket idle between draining and the next write.
                if writable():
                    await send({"type": "http.response.body", "body": data, "more_body": True})
                else:
                    self.chunk_skipped(len(data))
            if self.cut_off() and gate.abort():
                return
        finally:
            gate.release()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def disconnect(self) -> None:
        if self.writer is not None:
            self.writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.writer
        await self.close_stream()


class TransportStreamConsumer(StreamingConsumer):
    """``GET /ts``: the active channel's bytes, until the channel changes (then the response
    ends and players rebuild for the new stream)."""

    subscription = None

    async def open_stream(self) -> NextChunk | None:
        joined = await viewer_join()
        if isinstance(joined, Refusal):
            retry = str(joined.retry_after_sec).encode()
            await self.send_response(
                503, joined.reason.encode(), headers=[TEXT, (b"Retry-After", retry)]
            )
            return None
        self.subscription = joined
        return joined.next_data

    async def close_stream(self) -> None:
        if self.subscription is not None:
            await viewer_leave(subscription=self.subscription)

    def chunk_skipped(self, size: int) -> None:
        self.subscription.skipped(size)

    def cut_off(self) -> bool:
        return self.subscription.cut_off


class DemoChannelConsumer(StreamingConsumer):
    """``GET /tv/demo/<n>.ts``: a live test pattern encoded here, so the default playlist
    plays with no internet. Encoders are capped, as each costs a share of a core."""

    MAX_ENCODERS = 4
    _running: ClassVar[int] = 0
    stop: threading.Event | None = None

    async def open_stream(self) -> NextChunk | None:
        number = self.scope["url_route"]["kwargs"]["number"]
        if DemoChannelConsumer._running >= self.MAX_ENCODERS:
            await self.send_response(503, b"too many demo streams", headers=[TEXT])
            return None
        DemoChannelConsumer._running += 1
        self.stop = threading.Event()
        chunks = iterate_in_thread(
            lambda: demo_chunks(PatternOptions(), label=f"TEST PATTERN {number}"),
            stop=self.stop,
            name="demo-channel",
            buffered=64,
        )
        return functools.partial(anext, chunks, None)

    async def close_stream(self) -> None:
        if self.stop is not None:
            self.stop.set()
            self.stop = None
            DemoChannelConsumer._running -= 1


class StatusConsumer(AsyncJsonWebsocketConsumer):
    """``ws /ws/tv/status``: the stream status, pushed on every change; read-only.

    A client may send ``{"type": "refresh"}`` to get the status (with the current channel's
    playlist details) again; the viewer page does so hourly."""

    async def connect(self) -> None:
        await self.channel_layer.group_add(STATUS_GROUP, self.channel_name)
        await self.accept()
        await self._send_status()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(STATUS_GROUP, self.channel_name)

    async def receive_json(self, content: object, **kwargs: object) -> None:
        if isinstance(content, dict) and content.get("type") == "refresh":
            await self._send_status()

    async def status_changed(self, event: dict) -> None:
        await self._send_status()

    async def _send_status(self) -> None:
        status = await database_sync_to_async(viewer_status)()
        await self.send_json({**status, **await viewer_counts()})
