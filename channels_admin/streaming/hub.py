"""The fan-out hub: ONE upstream HTTP connection, its MPEG-TS bytes relayed to every viewer.

The hub knows nothing about views or the database: bytes come in from the upstream, whole
188-byte packets (``ts.py``) go out to subscriptions (``subscription.py``), and status changes
are reported to its owner (``on_event``: the runtime).

- At most one upstream connection exists at any time. A switch cancels the reader and waits for
  its connection to close before the next one opens, so the provider never sees two.
- Reads are gathered into chunks of up to 64 KiB or 100 ms before they go out, because each
  chunk costs one wake-up and one write per viewer.
- Every subscription has a bounded buffer; when it overflows, the OLDEST chunks go (whole chunks
  of whole packets). A viewer that cannot keep up thus loses data (the consumer also drops chunks
  while its socket is backed up) but never slows the upstream read or the other viewers.
- A channel has sources: the primary and its backups. A source fails on a connection or HTTP
  error, when it sends nothing for the stall timeout, when its own clock falls behind real time
  over a window (``pace.py``), when it sends no key frame in time, or when it ends. The hub
  then fails over to the next source at once (``sources.py``: round the list, each source with
  its own capped backoff), still over one connection at a time: it never probes a source in
  the background. Viewers stay connected: the slate (``slate.py``) plays while no source does,
  and each source starts from its first key frame (``key_frame_gate.py``), its timestamps
  shifted to go on from the last ones sent (``restamp.py``).
- A switch ends every open subscription: players must rebuild for the new stream, whose codecs
  and timestamps differ. Within a switch, every other change of stream (the slate, a source
  after it or after another, a source's own change of codec, profile or picture size, as
  ``stream_format.py`` reads them) is reported instead (:attr:`HubEvent.STREAM`): a browser
  player does not survive it (issue 48), so the viewer page starts a new one.
- When the process cannot carry its viewers, the load guard (``admission.py``) ends the streams
  of the newest (:meth:`Hub.shed`); what each viewer that reads lost is counted for it
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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import aiohttp

from channels_admin.streaming.failure_reasons import failure_detail, failure_reason
from channels_admin.streaming.gop_cache import GopCache
from channels_admin.streaming.hls_input import (
    PLAYLIST_MAX_BYTES,
    HlsError,
    HlsReader,
    Response,
    looks_like_hls,
)
from channels_admin.streaming.hls_output import HlsOutput
from channels_admin.streaming.key_frame_gate import KeyFrameGate
from channels_admin.streaming.pace import PaceMeter
from channels_admin.streaming.relay import Relay, RelayError
from channels_admin.streaming.restamp import Restamper
from channels_admin.streaming.slate import Slate
from channels_admin.streaming.sources import SourceCycle, Upstream, source_label
from channels_admin.streaming.stream_format import FormatWatch
from channels_admin.streaming.subscription import Subscription
from channels_admin.streaming.ts import PacketAligner
from channels_admin.streaming.ts_scan import StreamLayout
from channels_admin.streaming.upstream_addresses import UpstreamAddresses

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
SLOW_WINDOW_SECONDS = 10.0  # a source behind real time over this long has failed
KEY_FRAME_TIMEOUT_SECONDS = 10.0  # a source without a key frame this long after connecting too
SLATE_DELAY_SECONDS = 1.0  # a switch's first source may take this long before the slate plays


class HubEvent(enum.Enum):
    FLOWING = "flowing"  # a source plays: its first key frame went out to the viewers
    PLAYING = "playing"  # what is playing changed (detail: e.g. "HLS 1280x720, segment 18")
    DOWN = "down"  # the source that played failed (detail: why); the hub fails over
    MISSED = "missed"  # a source tried while none played failed (detail: why)
    # The viewers' stream changed without ending (detail: its format, e.g. "H.264 Main
    # 640x360, AAC"): a player must start afresh. Not the first stream of a switch.
    STREAM = "stream"


@dataclass(frozen=True)
class HubReport:
    """What the hub tells its owner about one of the channel's sources."""

    event: HubEvent
    sources: tuple[Upstream, ...]
    index: int | None  # which source; None: the slate (a STREAM)
    detail: str
    # FLOWING: the source took over from another that failed (for the switch's first source to
    # play, from the primary, which failed to start)
    failover: bool = False
    generation: str = ""  # the switch whose sources these are

    @property
    def label(self) -> str:
        return "slate" if self.index is None else source_label(self.index, len(self.sources))


class UpstreamError(Exception):
    pass


EventCallback = Callable[[HubReport], Awaitable[None]]


class Hub:
    """Holds the upstream reader task and the set of subscriptions."""

    def __init__(
        self,
        *,
        connect_timeout: float,
        stall_timeout: float,
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
        slow_window_seconds: float = SLOW_WINDOW_SECONDS,
        key_frame_timeout: float = KEY_FRAME_TIMEOUT_SECONDS,
        slate_delay: float = SLATE_DELAY_SECONDS,
        slate_pattern: bool = True,
        hls: HlsOutput | None = None,
        upstream_addresses: UpstreamAddresses | None = None,
    ) -> None:
        # None: any address (the hub's own tests); the server passes its settings'
        self._upstream_addresses = upstream_addresses
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=stall_timeout
        )
        self._stall_timeout = stall_timeout
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
        self._slow_window = slow_window_seconds
        self._key_frame_timeout = key_frame_timeout
        self._slate_delay = slate_delay
        self._gop = GopCache(max_bytes=gop_cache_bytes, max_seconds=gop_cache_seconds)
        self._slate = Slate(self._deliver, pattern=slate_pattern)
        self._layout: StreamLayout | None = None  # the PIDs of the source that played last
        self._restamp = Restamper()
        self._format = FormatWatch()  # of the stream that goes out to the viewers
        self._streams_begun = 0  # since the switch
        self.hls = hls if hls is not None else HlsOutput()  # the stream as HLS segments
        # A dict for its order: the newest viewers are the first to be cut off.
        self._subscriptions: dict[Subscription, None] = {}
        self._sources: tuple[Upstream, ...] = ()
        self._generation = ""
        self._task: asyncio.Task[None] | None = None
        self._switch_lock = asyncio.Lock()
        self._viewers_changed = asyncio.Event()
        self._reporter: asyncio.Task[None] | None = None
        self.playing_index: int | None = None  # the source that plays now, if one does
        self.streamed_bytes = 0  # relayed to the viewers since the hub started

    @property
    def upstream(self) -> Upstream | None:
        """The channel's primary source; None while no channel is set."""
        return self._sources[0] if self._sources else None

    @property
    def sources(self) -> tuple[Upstream, ...]:
        return self._sources

    @property
    def slate_playing(self) -> bool:
        return self._slate.playing

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
        """Per viewer of this process that reads (by its subscription's id), the bytes it has
        lost: its buffer overflows when its writer cannot keep up, and its writer skips chunks
        while its socket is backed up. A viewer that reads nothing is left out: what it loses
        says nothing of the process's load (``subscription.py``)."""
        now = time.monotonic()
        return {
            id(subscription): subscription.dropped_bytes
            for subscription in self._subscriptions
            if subscription.reads(now)
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

    async def switch(self, sources: Sequence[Upstream], generation: str = "") -> None:
        """Point the hub at a channel's ``sources``, the primary first (none: stop), the switch
        called ``generation``. Returns once the old connection is closed and the new reader
        started; open subscriptions are ended."""
        async with self._switch_lock:
            await self._stop_reader()
            for subscription in self._subscriptions:
                subscription.end()
            self._subscriptions.clear()
            self._viewers_changed.set()
            self._gop.clear()
            self._restamp.reset()
            self._format.restart()
            self._streams_begun = 0
            if sources:
                self.hls.discontinuity()
            else:
                self.hls.reset()
            self._viewer_limit = self._viewer_buffer_bytes
            self._sources = tuple(sources)
            self._generation = generation
            if self._sources:
                self._task = asyncio.create_task(self._read_or_follow(self._sources))

    async def close(self) -> None:
        await self.switch(())
        reporter, self._reporter = self._reporter, None
        await _cancelled(reporter)
        if self._relay is not None:
            await self._relay.close()

    async def _stop_reader(self) -> None:
        task, self._task = self._task, None
        await _cancelled(task)

    async def _read_or_follow(self, sources: tuple[Upstream, ...]) -> None:
        """Without a relay, read the sources. With one, read them while this process owns the
        upstream, and otherwise follow the owner's chunks; try to take over whenever the owner
        is gone."""
        relay = self._relay
        if relay is None:
            await self._read_sources(sources)
            return
        while True:
            try:
                if await relay.own():
                    await self._read_while_owner(relay, sources)
                else:
                    async for data in relay.follow(self._generation):
                        self._push(data)
            except RelayError as error:
                logger.warning("relay: %s; trying again in %.1fs", error, relay.renew_seconds)
                await asyncio.sleep(relay.renew_seconds)

    async def _read_while_owner(self, relay: Relay, sources: tuple[Upstream, ...]) -> None:
        reader = asyncio.create_task(self._read_sources(sources))
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

    async def _deliver(self, data: bytes) -> None:
        """To this process's viewers, and through the relay to the other processes', on one
        time line whatever plays; a change of stream reported once these bytes of it are out
        (a player started for it gets them from the GOP cache)."""
        data = self._restamp.feed(data)
        self._push(data)
        if self._relay is not None:
            try:
                await self._relay.publish(self._generation, data)
            except RelayError as error:
                # The viewers of this process go on; the renewal decides who owns the upstream.
                logger.warning("relay: could not publish a chunk: %s", error)
        first = self._format.format is None
        told = self._format.feed(data)
        if told is not None and (not first or self._streams_begun > 1):
            logger.info("the viewers' stream changed: %s", told or "format unknown")
            await self._emit(HubEvent.STREAM, self._sources, self.playing_index, told)

    def _stream_begins(self) -> None:
        """Another stream goes out to the viewers from the next chunk on (a source, the slate):
        its timestamps go on from the last ones sent, it starts an HLS discontinuity, and its
        format is read afresh."""
        self.hls.discontinuity()
        self._restamp.begin()
        self._format.restart()
        self._streams_begun += 1

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

    async def _read_sources(self, sources: tuple[Upstream, ...]) -> None:
        """Play the channel: its first source that answers, then, whenever the one that plays
        fails, the next (:class:`SourceCycle`), one connection at a time. The slate plays
        while none does."""
        cycle = SourceCycle(
            len(sources), backoff_initial=self._backoff_initial, backoff_max=self._backoff_max
        )
        # An HLS source's place in its playlist outlives a reconnect: no segment twice.
        readers = [HlsReader(max_bandwidth=self._hls_max_bandwidth) for _ in sources]
        slate_later = asyncio.get_running_loop().call_later(self._slate_delay, self._slate_due)
        index, outage_logged, played_last = None, False, 0
        logged: dict[int, str] = {}  # the last failure of each source logged at INFO
        try:
            while True:
                index, wait = cycle.next(index)
                if wait > 0:
                    await asyncio.sleep(wait)
                connected = asyncio.get_running_loop().time()
                played, reason, detail = await self._play(
                    sources, index, readers[index], failover=index != played_last
                )
                self.playing_index = None
                backoff = cycle.failed(
                    index,
                    played_seconds=played or 0.0,
                    connected_seconds=asyncio.get_running_loop().time() - connected,
                )
                label = source_label(index, len(sources))
                if played is not None:
                    played_last = index
                    self._slate_start(self._layout)
                    logger.warning(
                        "failover: the %s source failed after playing %.0f s: %s (%s)",
                        label,
                        played,
                        reason,
                        detail,
                    )
                    outage_logged = False
                    await self._emit(HubEvent.DOWN, sources, index, reason)
                    continue
                if not outage_logged and index == len(sources) - 1:
                    logger.warning("no source of the channel answers; the last: %s", reason)
                    outage_logged = True
                # A new kind of failure is logged with its detail once; the retries quietly.
                level = logging.DEBUG if logged.get(index) == detail else logging.INFO
                logged[index] = detail
                logger.log(
                    level,
                    "%s: %s (%s); retried in %.1f s at the earliest",
                    label,
                    reason,
                    detail,
                    backoff,
                )
                await self._emit(HubEvent.MISSED, sources, index, reason)
        finally:
            slate_later.cancel()
            self.playing_index = None
            await self._slate.stop()
            for reader in readers:
                reader.close()

    def _slate_due(self) -> None:
        """A switch's first source has had its time to start; while none plays, the slate
        does."""
        if self.playing_index is None:
            self._slate_start(None)

    def _slate_start(self, layout: StreamLayout | None) -> None:
        """Play the slate (on ``layout``'s PIDs): another stream."""
        if not self._slate.playing:
            self._stream_begins()
            self._slate.start(layout)

    async def _play(
        self, sources: tuple[Upstream, ...], index: int, hls: HlsReader, *, failover: bool
    ) -> tuple[float | None, str, str]:
        """Relay one connection of source ``index`` from its first key frame on: how long it
        played (None: it never started), why it ended (:func:`failure_reason`) and the
        technical detail, for the log. ``failover``: it takes over from another source."""
        loop = asyncio.get_running_loop()
        gate, pace = KeyFrameGate(), PaceMeter(window_seconds=self._slow_window)
        connected = loop.time()
        started: float | None = None
        received, playing, reported = False, "", 0.0
        try:
            async for data in self._read_once(sources[index], hls):
                received = True
                pace.feed(data)
                if started is None:
                    data = gate.feed(data)
                    if not data:
                        if loop.time() - connected > self._key_frame_timeout:
                            raise UpstreamError(f"no key frame in {self._key_frame_timeout:g} s")
                        continue
                    await self._slate.stop()
                    self._stream_begins()  # after the slate or the source that failed
                    self._layout = gate.layout
                    started, playing, reported = loop.time(), hls.playing, loop.time()
                    self.playing_index = index
                    await self._emit(HubEvent.FLOWING, sources, index, playing, failover=failover)
                elif hls.playing != playing and loop.time() - reported >= PLAYING_REPORT_SECONDS:
                    playing, reported = hls.playing, loop.time()
                    await self._emit(HubEvent.PLAYING, sources, index, playing)
                await self._deliver(data)
                if pace.slow():
                    raise UpstreamError(
                        f"the upstream sends {pace.ratio():.0%} of real time"
                        f" over {self._slow_window:g} s"
                    )
            reason, detail = "the upstream ended the stream", "the response ended"
        except TimeoutError as error:  # aiohttp's connect and read timeouts are TimeoutErrors too
            reason = (
                f"the upstream stalled (no data for {self._stall_timeout:g} s)"
                if received
                else "the upstream did not answer in time"
            )
            detail = failure_detail(error)
        except (UpstreamError, HlsError) as error:  # their texts are written for the status
            reason, detail = str(error), failure_detail(error)
        except Exception as error:
            if not isinstance(error, aiohttp.ClientError):
                # Whatever else goes wrong (a bug) must not end the retries.
                logger.exception("upstream %s failed unexpectedly", sources[index].url)
            reason, detail = failure_reason(error), failure_detail(error)
        return (None if started is None else loop.time() - started), reason, detail

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
        addresses = self._upstream_addresses
        checked = addresses is not None and upstream.url not in addresses.trusted_urls
        async with aiohttp.ClientSession(
            # every connection's address checked as it opens: redirects and segments too
            connector=aiohttp.TCPConnector(
                limit=1, socket_factory=addresses.socket_factory if checked else None
            ),
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

    async def _emit(
        self,
        event: HubEvent,
        sources: tuple[Upstream, ...],
        index: int | None,
        detail: str,
        *,
        failover: bool = False,
    ) -> None:
        if self._on_event is None:
            return
        try:
            await self._on_event(
                HubReport(event, sources, index, detail, failover, self._generation)
            )
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
