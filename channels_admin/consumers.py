"""Async consumers: the shared MPEG-TS stream at /ts."""

from __future__ import annotations

import asyncio
import contextlib

from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer

from channels_admin.backpressure import WriteGate
from channels_admin.hub import Subscription
from channels_admin.services.stream import stream_hub

TS_HEADERS = [
    (b"Content-Type", b"video/mp2t"),
    (b"Cache-Control", b"no-cache"),
    (b"Access-Control-Allow-Origin", b"*"),
]


class TransportStreamConsumer(AsyncHttpConsumer):
    """``GET /ts``: the active channel's bytes, chunked, until the channel changes.

    The response is written by a separate task so that this consumer keeps receiving ASGI
    messages and learns at once when the viewer disconnects.
    """

    # Viewers are fed by the hub directly; no channel layer round trip per viewer.
    channel_layer_alias = None
    subscription: Subscription | None = None
    writer: asyncio.Task[None] | None = None

    async def http_request(self, message: dict) -> None:
        if message.get("more_body"):
            return
        if self.scope["method"] not in {"GET", "HEAD"}:
            await self.send_response(
                405,
                b"method not allowed",
                headers=[(b"Content-Type", b"text/plain"), (b"Allow", b"GET")],
            )
            raise StopConsumer()
        hub = await stream_hub()
        if hub.upstream is None:
            await self.send_response(
                503,
                b"no channel selected: an administrator must pick one first",
                headers=[(b"Content-Type", b"text/plain; charset=utf-8"), (b"Retry-After", b"5")],
            )
            raise StopConsumer()
        await self.send_headers(status=200, headers=TS_HEADERS)
        if self.scope["method"] == "HEAD":
            await self.send_body(b"")
            raise StopConsumer()
        self.subscription = hub.subscribe()
        self.writer = asyncio.create_task(self._write(self.subscription))

    async def _write(self, subscription: Subscription) -> None:
        gate = WriteGate(self.base_send)
        try:
            while (data := await subscription.next_data()) is not None:
                await gate.open.wait()
                await self.send_body(data, more_body=True)
        finally:
            gate.release()
        await self.send_body(b"")

    async def disconnect(self) -> None:
        if self.subscription is not None:
            (await stream_hub()).unsubscribe(self.subscription)
        if self.writer is not None:
            self.writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.writer
