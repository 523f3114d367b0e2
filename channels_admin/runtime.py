"""This process's stream runtime: its hub, the admission of its viewers, its demo encoders, and
(with Redis) the listener that makes its hub follow the switches other processes make.

One object per process (:func:`stream_runtime`), because the hub holds the process's ONE
upstream connection: two hubs would open two. The hub itself is built on first use, on the
event loop, since building it resumes the channel that was live before a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Coroutine

from channels.db import database_sync_to_async
from django.conf import settings

from channels_admin.models import StreamState
from channels_admin.services.playlists import demo_entries
from channels_admin.services.status import hub_event_record
from channels_admin.streaming.admission import Admission, LoadGuard
from channels_admin.streaming.encoder_slots import DEMO_ENCODERS, EncoderSlots
from channels_admin.streaming.hub import Hub, Upstream
from channels_admin.streaming.relay import Relay
from channels_admin.streaming.upstream_addresses import UpstreamAddresses


class StreamRuntime:
    """The hub (built once, behind a lock), the admission of ``/ts`` viewers, the demo
    channels' encoders, and the switch listener; :meth:`close` ends them for a server shutdown
    (a later use builds a new hub)."""

    def __init__(self) -> None:
        self.admission = Admission(max_viewers=settings.CHANNELS_MAX_VIEWERS)
        self.demo_slots = EncoderSlots(
            total=DEMO_ENCODERS, per_client=settings.CHANNELS_DEMO_STREAMS_PER_CLIENT
        )
        self._hub: Hub | None = None
        self._hub_ready: asyncio.Lock | None = None
        self._switch_listener: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None

    @property
    def running_hub(self) -> Hub | None:
        """The hub if one is running now; never builds one."""
        return self._hub

    async def hub(self) -> Hub:
        """The hub; the first call resumes the channel that was live before a restart. With
        ``REDIS_URL`` it joins the other processes' hubs through the relay."""
        if self._hub_ready is None:
            self._hub_ready = asyncio.Lock()
        async with self._hub_ready:
            if self._hub is None:
                self._hub = await self._hub_start()
        return self._hub

    async def _hub_start(self) -> Hub:
        relay = (
            Relay(
                settings.REDIS_URL,
                prefix=settings.CHANNELS_RELAY_PREFIX,
                lock_seconds=settings.CHANNELS_RELAY_LOCK_SEC,
            )
            if settings.REDIS_URL
            else None
        )
        hub = Hub(
            connect_timeout=settings.CHANNELS_UPSTREAM_CONNECT_TIMEOUT_SEC,
            stall_timeout=settings.CHANNELS_STALL_TIMEOUT,
            viewer_buffer_bytes=settings.CHANNELS_VIEWER_BUFFER_BYTES,
            on_event=hub_event_record,
            relay=relay,
            hls_max_bandwidth=settings.CHANNELS_HLS_MAX_BANDWIDTH,
            gop_cache_bytes=settings.CHANNELS_GOP_CACHE_BYTES,
            gop_cache_seconds=settings.CHANNELS_GOP_CACHE_SEC,
            slate_pattern=settings.CHANNELS_SLATE,
            upstream_addresses=upstream_addresses(),
        )
        state = await database_sync_to_async(StreamState.load)()
        if state.live and state.source_list:
            await hub.switch(upstreams(state.source_list), state.generation)
        if relay is not None:
            self._switch_listener = asyncio.create_task(relay.listen(self._switch_followed))
        guard = LoadGuard(hub)
        guard.start()
        self.admission.guard = guard
        return hub

    async def switch(self, sources: list[dict], generation: str) -> None:
        """Point this process's hub at a channel's ``sources`` (``{url, headers}``, the primary
        first) and tell the other processes' hubs."""
        hub = await self.hub()
        await hub.switch(upstreams(sources), generation)
        if hub.relay is not None:
            await hub.relay.announce({"sources": sources, "generation": generation})

    def watch(self, outcome: Coroutine[None, None, None]) -> None:
        """Run ``outcome`` (what follows a switch) in the background, in place of the last
        switch's, which a new switch makes moot."""
        if self._watch is not None and self._watch is not asyncio.current_task():
            self._watch.cancel()
        self._watch = asyncio.create_task(outcome)

    async def _switch_followed(self, switch: dict) -> None:
        """A switch announced by any process: this process's hub follows unless it made it."""
        hub = self._hub
        if hub is not None and hub.generation != switch["generation"]:
            await hub.switch(upstreams(switch["sources"]), switch["generation"])

    async def close(self) -> None:
        """Close the upstream connection and end the viewers (server shutdown, tests)."""
        hub, self._hub = self._hub, None
        listener, self._switch_listener = self._switch_listener, None
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        if hub is not None:
            await hub.close()
        guard, self.admission.guard = self.admission.guard, None
        if guard is not None:
            await guard.stop()


def upstreams(sources: list[dict]) -> list[Upstream]:
    """Recorded sources (``{url, headers}``) as the hub takes them."""
    return [Upstream(source["url"], source.get("headers") or {}) for source in sources]


@functools.cache
def stream_runtime() -> StreamRuntime:
    """This process's stream runtime, built on the first call."""
    return StreamRuntime()


def upstream_addresses() -> UpstreamAddresses:
    """Where the hub may connect, from the settings; the demo channels' URLs are the server's
    own, written by it."""
    return UpstreamAddresses(
        deny=settings.CHANNELS_UPSTREAM_DENY,
        allow=settings.CHANNELS_UPSTREAM_ALLOW,
        trusted_urls=frozenset(entry.url for entry in demo_entries()),
    )
