"""The fan-out hub: ONE upstream HTTP connection, its MPEG-TS bytes relayed to every viewer.

The hub knows nothing about views or the database: bytes come in from the upstream, whole
188-byte packets (``ts.py``) go out to subscriptions (``subscription.py``), and status changes
are reported to a callback.

- At most one upstream connection exists at any time. A switch cancels the reader and waits for
  its connection to close before the next one opens, so the provider never sees two.
- Reads are gathered into chunks of up to 64 KiB or 100 ms before they go out, because each
  chunk costs one wake-up and one write per viewer.
- Every subscription has a bounded buffer; when it overflows, the OLDEST chunks go (whole chunks
  of whole packets). A viewer that cannot keep up thus loses data (the consumer also drops chunks
  while its socket is backed up) but never slows the upstream read or the other viewers.
- When the upstream fails, stalls (read timeout) or ends, the hub reports it and reconnects with
  capped exponential backoff; viewers stay connected and resume when bytes flow again.
- A switch ends every open subscription: players must rebuild for the new stream, whose codecs
  and timestamps differ.
- When the process cannot carry its viewers, the load guard (``admission.py``) ends the streams
  of the newest (:meth:`Hub.shed`); what each viewer lost is counted for it
  (:meth:`Hub.viewer_drops`).
- With a :class:`~channels_admin.streaming.relay.Relay` (several server processes), only the
  process that owns the upstream reads it, and publishes what it reads; the others follow those
  chunks. Each process reports its viewer count there too, so that :meth:`Hub.viewers_total`
  counts them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import aiohttp

from channels_admin.streaming.gop_cache import GopCache
from channels_admin.streaming.hls import (
    PLAYLIST_MAX_BYTES,
    HlsError,
    HlsReader,
    Response,
    looks_like_hls,
)
from channels_admin.streaming.hls_output import HlsOutput
from channels_admin.streaming.relay import Relay, RelayError
from channels_admin.streaming.subscription import Subscription
from channels_admin.streaming.ts import PacketAligner

logger = logging.getLogger(__name__)

# An upstream that sends this much without two packets in sync is not sending MPEG-TS.
SYNC_GIVE_UP_BYTES = 1024 * 1024
SEGMENT_MAX_BYTES = 256 * 1024 * 1024  # an HLS segment, key or init section
PLAYING_REPORT_SECONDS = 5.0  # what is playing is reported when it changes, at most this often
# A viewer's buffer holds at least this many seconds' worth of the most the upstream has sent in
# one second: an HLS upstream comes a segment at a time, and a burst must not cost a viewer
# that keeps up on average its data. Chunks are shared between viewers, so this costs memory
# only for the bytes a viewer really lags behind. Never more than the cap.
BURST_SECONDS = 4
BURST_CAP_BYTES = 64 * 1024 * 1024


class HubEvent(enum.Enum):
    FLOWING = "flowing"  # the first bytes after a switch or an outage arrived
    PLAYING = "playing"  # what is playing changed (detail: e.g. "HLS 1280x720, segment 18")
    DOWN = "down"  # the upstream failed, stalled or ended; reconnecting


@dataclass(frozen=True)
class Upstream:
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)


class UpstreamError(Exception):
    pass


EventCallback = Callable[[HubEvent, Upstream, str], Awaitable[None]]


class Hub:
    """Holds the upstream reader task and the set of subscriptions."""

    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        viewer_buffer_bytes: int,
        on_event: EventCallback | None = None,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
        flush_bytes: int = 64 * 1024,
        flush_seconds: float = 0.1,
        relay: Relay | None = None,
        hls_max_bandwidth: int | None = None,
        gop_cache_bytes: int = 0,
        gop_cache_seconds: float = 15.0,
        hls: HlsOutput | None = None,
    ) -> None:
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=read_timeout
        )
        self._viewer_buffer_bytes = viewer_buffer_bytes
        self._viewer_limit = viewer_buffer_bytes  # widened for bursty upstreams
        self._second_started, self._second_bytes = 0.0, 0
        self._on_event = on_event
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._flush_bytes = flush_bytes
        self._flush_seconds = flush_seconds
        self._relay = relay
        self._hls_max_bandwidth = hls_max_bandwidth
        self._gop = GopCache(max_bytes=gop_cache_bytes, max_seconds=gop_cache_seconds)
        self.hls = hls if hls is not None else HlsOutput()  # the stream as HLS segments
        # A dict for its order: the newest viewers are the first to be cut off.
        self._subscriptions: dict[Subscription, None] = {}
        self._upstream: Upstream | None = None
        self._generation = ""
        self._task: asyncio.Task[None] | None = None
        self._switch_lock = asyncio.Lock()
        self._viewers_changed = asyncio.Event()
        self._reporter: asyncio.Task[None] | None = None
        self.streamed_bytes = 0  # relayed to the viewers since the hub started

    @property
    def upstream(self) -> Upstream | None:
        return self._upstream

    @property
    def relay(self) -> Relay | None:
        return self._relay

    @property
    def generation(self) -> str:
        return self._generation

    @property
    def viewers(self) -> int:
        """This process's viewers."""
        return len(self._subscriptions)

    async def viewers_total(self) -> int:
        """The viewers of every process sharing the relay (this one's alone without it)."""
        if self._relay is None:
            return self.viewers
        try:
            return await self._relay.viewers_total()
        except RelayError as error:
            logger.warning("relay: could not count the viewers: %s", error)
            return self.viewers

    def viewer_drops(self) -> dict[int, int]:
        """Per viewer of this process (by its subscription's id), the bytes it has lost: its
        buffer overflows when its writer cannot keep up, and its writer skips chunks while its
        socket is backed up."""
        return {
            id(subscription): subscription.dropped_bytes for subscription in self._subscriptions
        }

    def subscribe(self) -> Subscription:
        """A new viewer, who starts at the current picture group's key frame when the GOP
        cache has one (so the first picture needs no wait), else at the live edge."""
        subscription = Subscription(self._viewer_limit)
        start = self._gop.start()
        if start:
            subscription.push(start)
        self._subscriptions[subscription] = None
        self._viewers_changed.set()
        if self._relay is not None and self._reporter is None:
            self._reporter = asyncio.create_task(self._report_viewers(self._relay))
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.pop(subscription, None)
        self._viewers_changed.set()

    def shed(self, count: int) -> None:
        """End the streams of the ``count`` newest viewers: those the process cannot carry."""
        newest = list(self._subscriptions)[max(0, len(self._subscriptions) - count) :]
        for subscription in newest:
            subscription.end(cut_off=True)
            del self._subscriptions[subscription]
        self._viewers_changed.set()

    async def _report_viewers(self, relay: Relay) -> None:
        """Report the count when it changes (at most one report in flight, so a burst of
        viewers coming and going costs a few round trips) and within every renewal period."""
        while True:
            self._viewers_changed.clear()
            try:
                await relay.viewers_report(self.viewers)
            except RelayError as error:
                logger.warning("relay: could not report the viewers: %s", error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._viewers_changed.wait(), relay.renew_seconds)

    async def switch(self, upstream: Upstream | None, generation: str = "") -> None:
        """Point the hub at ``upstream`` (None: stop), the switch called ``generation``. Returns
        once the old connection is closed and the new reader started; open subscriptions are
        ended."""
        async with self._switch_lock:
            await self._stop_reader()
            for subscription in self._subscriptions:
                subscription.end()
            self._subscriptions.clear()
            self._viewers_changed.set()
            self._gop.clear()
            self.hls.reset() if upstream is None else self.hls.discontinuity()
            self._viewer_limit = self._viewer_buffer_bytes
            self._upstream = upstream
            self._generation = generation
            if upstream is not None:
                self._task = asyncio.create_task(self._read_or_follow(upstream))

    async def close(self) -> None:
        await self.switch(None)
        reporter, self._reporter = self._reporter, None
        await _cancelled(reporter)
        if self._relay is not None:
            await self._relay.close()

    async def _stop_reader(self) -> None:
        task, self._task = self._task, None
        await _cancelled(task)

    async def _read_or_follow(self, upstream: Upstream) -> None:
        """Without a relay, read the upstream. With one, read it while this process owns it,
        and otherwise follow the owner's chunks; try to take over whenever the owner is gone."""
        relay = self._relay
        if relay is None:
            await self._read_forever(upstream)
            return
        while True:
            try:
                if await relay.own():
                    await self._read_while_owner(relay, upstream)
                else:
                    async for data in relay.follow(self._generation):
                        self._push(data)
            except RelayError as error:
                logger.warning("relay: %s; trying again in %.1fs", error, relay.renew_seconds)
                await asyncio.sleep(relay.renew_seconds)

    async def _read_while_owner(self, relay: Relay, upstream: Upstream) -> None:
        reader = asyncio.create_task(self._read_forever(upstream))
        try:
            while not reader.done():
                await asyncio.sleep(relay.renew_seconds)
                if not await relay.own():
                    logger.warning("relay: another process owns the upstream now")
                    return
        finally:
            await _cancelled(reader)

    def _push(self, data: bytes) -> None:
        self.streamed_bytes += len(data)
        self._gop.feed(data)
        self.hls.feed(data)
        self._fit_bursts(len(data))
        for subscription in self._subscriptions:
            subscription.push(data)

    def _fit_bursts(self, size: int) -> None:
        """Widen the viewers' buffers to ``BURST_SECONDS`` of the largest second seen."""
        now = time.monotonic()
        if now - self._second_started >= 1.0:
            self._second_started, self._second_bytes = now, 0
        self._second_bytes += size
        wanted = min(BURST_SECONDS * self._second_bytes, BURST_CAP_BYTES)
        if wanted > self._viewer_limit:
            self._viewer_limit = wanted
            for subscription in self._subscriptions:
                subscription.widen(wanted)

    async def _publish(self, data: bytes) -> None:
        try:
            await self._relay.publish(self._generation, data)
        except RelayError as error:
            # The viewers of this process go on; the renewal decides who owns the upstream.
            logger.warning("relay: could not publish a chunk: %s", error)

    async def _read_forever(self, upstream: Upstream) -> None:
        backoff = self._backoff_initial
        # An HLS upstream's place in its playlist outlives a reconnect: no segment twice.
        hls = HlsReader(max_bandwidth=self._hls_max_bandwidth)
        try:
            while True:
                flowed, reason = await self._read_until_down(upstream, hls)
                if flowed:
                    backoff = self._backoff_initial
                logger.warning("upstream %s: %s; retrying in %.1fs", upstream.url, reason, backoff)
                await self._emit(HubEvent.DOWN, upstream, reason)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._backoff_max)
        finally:
            hls.close()

    async def _read_until_down(self, upstream: Upstream, hls: HlsReader) -> tuple[bool, str]:
        """Relay one connection's bytes: whether any flowed, and why it ended (for the status)."""
        loop = asyncio.get_running_loop()
        flowed, playing, reported = False, "", 0.0
        try:
            async for data in self._read_once(upstream, hls):
                if not flowed:
                    flowed, playing, reported = True, hls.playing, loop.time()
                    await self._emit(HubEvent.FLOWING, upstream, playing)
                elif hls.playing != playing and loop.time() - reported >= PLAYING_REPORT_SECONDS:
                    playing, reported = hls.playing, loop.time()
                    await self._emit(HubEvent.PLAYING, upstream, playing)
                self._push(data)
                if self._relay is not None:
                    await self._publish(data)
            reason = "the upstream ended the stream"
        except TimeoutError:  # aiohttp's connect and read timeouts are TimeoutErrors too
            reason = "the upstream stalled (timeout)"
        except (aiohttp.ClientError, UpstreamError, HlsError) as error:
            reason = str(error) or type(error).__name__
        except Exception as error:
            # Whatever else goes wrong (a malformed URL, a bug) must not end the retries.
            logger.exception("upstream %s failed unexpectedly", upstream.url)
            reason = f"unexpected error: {error}"
        return flowed, reason

    async def _batched(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """Gather reads into fewer, larger chunks: every chunk costs a wake-up and a write per
        viewer, so with a thousand viewers the count matters far more than the size. The
        first chunk of a connection goes out at once, so a new stream starts promptly."""
        loop = asyncio.get_running_loop()
        pending: list[bytes] = []
        size, since, first = 0, 0.0, True
        async for data in chunks:
            if not pending:
                since = loop.time()
            pending.append(data)
            size += len(data)
            if first or size >= self._flush_bytes or loop.time() - since >= self._flush_seconds:
                yield pending[0] if len(pending) == 1 else b"".join(pending)
                pending.clear()
                size, first = 0, False
        if pending:  # what came last before the upstream ended
            yield b"".join(pending)

    async def _read_once(self, upstream: Upstream, hls: HlsReader) -> AsyncIterator[bytes]:
        """One connection's TS bytes: the stream itself, or the segments of an HLS playlist
        read one request at a time over the same client."""
        # A session per connection, closed on exit (also on cancel): no pooled connection
        # lingers. aiohttp keeps reading the socket while its buffer has room and hands over
        # everything buffered at once; a client that reads once per request of the consumer
        # falls behind the stream when the event loop is busy with a thousand viewers.
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1),
            timeout=self._timeout,
            auto_decompress=False,
        ) as session:
            async with session.get(upstream.url, headers=dict(upstream.headers)) as response:
                if response.status != 200:
                    raise UpstreamError(f"the upstream answered HTTP {response.status}")
                head = await response.content.readany()
                if not looks_like_hls(response.content_type, head):
                    async for data in self._batched(_ts_reads(response, head)):
                        yield data
                    return
                body = head + await _body(response, PLAYLIST_MAX_BYTES - len(head))
                playlist = Response(str(response.url), 200, response.content_type, body)

            async def fetch(url: str, byterange: tuple[int, int] | None) -> Response:
                headers = dict(upstream.headers)
                if byterange is not None:
                    headers["Range"] = f"bytes={byterange[0]}-{byterange[0] + byterange[1] - 1}"
                async with session.get(url, headers=headers) as answer:
                    body = await _body(answer, SEGMENT_MAX_BYTES) if answer.ok else b""
                    return Response(str(answer.url), answer.status, answer.content_type, body)

            # Not batched: segments come whole, and a batch would hold a segment's tail back
            # until the next one came.
            aligner = PacketAligner()
            async for data in hls.stream(fetch, upstream.url, playlist):
                data = aligner.feed(data)
                if data:
                    yield data

    async def _emit(self, event: HubEvent, upstream: Upstream, detail: str) -> None:
        if self._on_event is None:
            return
        try:
            await self._on_event(event, upstream, detail)
        except Exception:
            logger.exception("hub event handler failed for %s", event)


async def _body(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The rest of ``response``'s body, all of it (a read gives only what has arrived), and
    no more than ``limit`` bytes."""
    parts, size = [], 0
    async for part in response.content.iter_any():
        size += len(part)
        if size > limit:
            raise UpstreamError(f"the upstream sent more than {limit // 1024 // 1024} MiB at once")
        parts.append(part)
    return b"".join(parts)


async def _ts_reads(response: aiohttp.ClientResponse, head: bytes) -> AsyncIterator[bytes]:
    """An MPEG-TS response's bytes in whole packets, from ``head`` (its first read) on."""
    aligner = PacketAligner()
    data = aligner.feed(head)
    if data:
        yield data
    async for raw in response.content.iter_any():
        data = aligner.feed(raw)
        if data:
            aligner.skipped = 0
            yield data
        elif aligner.skipped > SYNC_GIVE_UP_BYTES:
            raise UpstreamError("the upstream is not sending MPEG-TS")


async def _cancelled(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has ended."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
