"""The fan-out hub: ONE upstream connection, its MPEG-TS bytes relayed to every viewer.

The hub knows nothing about views or the database: the failover loop (``failover.py``, reading
each source over ``upstream_reader.py``) hands it whole 188-byte packets (``ts.py``), the hub
hands them to subscriptions (``subscription.py``) and its HLS output (``hls_output.py``), and
status changes are reported to its owner (``on_event``: the runtime; ``hub_events.py``).

- At most one upstream connection exists at any time. A switch cancels the failover loop and
  waits for its connection to close before the next one opens, so the provider never sees two.
- Every subscription has a bounded buffer; when it overflows, the OLDEST chunks go (whole chunks
  of whole packets). A viewer that cannot keep up thus loses data (the consumer also drops chunks
  while its socket is backed up) but never slows the upstream read or the other viewers.
- Whatever plays (a source, the slate) goes out on one time line: each new stream's timestamps
  are shifted to go on from the last ones sent (``restamp.py``).
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
import logging
import time
from collections.abc import Callable, Sequence

from channels_admin.streaming.audio_watch import AUDIO_OFF, AudioChecks
from channels_admin.streaming.failover import (
    KEY_FRAME_TIMEOUT_SECONDS,
    SLATE_DELAY_SECONDS,
    SLOW_WINDOW_SECONDS,
    Failover,
)
from channels_admin.streaming.gop_cache import GopCache
from channels_admin.streaming.hls_output import HlsOutput
from channels_admin.streaming.hub_events import EventCallback, HubEvent, HubReport
from channels_admin.streaming.picture_watch import OFF, PictureChecks
from channels_admin.streaming.relay import Relay, RelayError
from channels_admin.streaming.restamp import Restamper
from channels_admin.streaming.sources import Upstream
from channels_admin.streaming.stream_format import FormatWatch
from channels_admin.streaming.subscription import Subscription
from channels_admin.streaming.upstream_addresses import UpstreamAddresses
from channels_admin.streaming.upstream_reader import UpstreamReader
from core.cancellation import cancellation_check, task_cancel

logger = logging.getLogger(__name__)

# A viewer's buffer holds at least this many seconds' worth of the most the upstream has sent in
# one second: an HLS upstream comes a segment at a time, and a burst must not cost a viewer
# that keeps up on average its data. Chunks are shared between viewers, so this costs memory
# only for the bytes a viewer really lags behind. Never more than the cap.
BURST_SECONDS = 4
BURST_CAP_BYTES = 64 * 1024 * 1024


class Hub:
    """Holds the failover loop's task and the set of subscriptions; the loop's output
    (:class:`~channels_admin.streaming.failover.FailoverOutput`)."""

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
        picture_checks: PictureChecks = OFF,
        audio_checks: AudioChecks = AUDIO_OFF,
    ) -> None:
        self._viewer_buffer_bytes = viewer_buffer_bytes
        self._viewer_limit = viewer_buffer_bytes  # widened for bursty upstreams
        self._second_started, self._second_bytes = 0.0, 0
        self._on_event = on_event
        self._relay = relay
        self._gop = GopCache(max_bytes=gop_cache_bytes, max_seconds=gop_cache_seconds)
        reader = UpstreamReader(
            connect_timeout=connect_timeout,
            stall_timeout=stall_timeout,
            flush_bytes=flush_bytes,
            flush_seconds=flush_seconds,
            addresses=upstream_addresses,
        )
        self._failover = Failover(
            self,
            reader,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
            hls_max_bandwidth=hls_max_bandwidth,
            slow_window_seconds=slow_window_seconds,
            key_frame_timeout=key_frame_timeout,
            slate_delay=slate_delay,
            slate_pattern=slate_pattern,
            picture_checks=picture_checks,
            audio_checks=audio_checks,
        )
        self._restamp = Restamper()
        self._format = FormatWatch()  # of the stream that goes out to the viewers
        self._streams_begun = 0  # since the switch
        self.hls = hls if hls is not None else HlsOutput()  # the stream as HLS segments
        # A dict for its order: the newest viewers are the first to be cut off.
        self._subscriptions: dict[Subscription, None] = {}
        self._per_link: dict[int | None, int] = {}  # the viewers through each private link
        self._sources: tuple[Upstream, ...] = ()
        self._generation = ""
        self._task: asyncio.Task[None] | None = None
        self._switch_lock = asyncio.Lock()
        self._viewers_changed = asyncio.Event()
        self._reporter: asyncio.Task[None] | None = None
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
        return self._failover.slate_playing

    @property
    def playing_index(self) -> int | None:
        """The source that plays now, if one does."""
        return self._failover.playing_index

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

    def subscribe(self, *, link: int | None = None) -> Subscription:
        """A new viewer (through the private viewer link ``link``, if any), who starts at the
        current picture group's key frame when the GOP cache has one (so the first picture
        needs no wait), else at the live edge."""
        subscription = Subscription(self._viewer_limit, link=link)
        start = self._gop.start()
        if start:
            subscription.push(start)
        self._subscriptions[subscription] = None
        self._per_link[link] = self._per_link.get(link, 0) + 1
        self._viewers_changed.set()
        if self._relay is not None and self._reporter is None:
            self._reporter = asyncio.create_task(self._report_viewers(self._relay))
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._forget(subscription)
        self._viewers_changed.set()

    def viewers_of(self, link: int | None) -> int:
        """This process's viewers through the private viewer link ``link`` (None: without)."""
        return self._per_link.get(link, 0)

    def viewers_per_link(self) -> dict[int | None, int]:
        """This process's viewers per private viewer link (None: those who came without)."""
        return {link: count for link, count in self._per_link.items() if count}

    def end_viewers(self, admitted: Callable[[int | None], bool]) -> int:
        """End the streams of the viewers whose link is no longer ``admitted`` (revoked,
        expired, or none while the stream is private); how many."""
        if all(admitted(link) for link in self.viewers_per_link()):
            return 0  # the usual case, in time of the links, not of the viewers
        gone = [sub for sub in self._subscriptions if not admitted(sub.link)]
        for subscription in gone:
            subscription.end()
            self._forget(subscription)
        self._viewers_changed.set()
        return len(gone)

    def _forget(self, subscription: Subscription) -> None:
        if self._subscriptions.pop(subscription, 0) is None:
            self._per_link[subscription.link] -= 1

    def shed(self, count: int) -> None:
        """End the streams of the ``count`` newest viewers: those the process cannot carry."""
        newest = list(self._subscriptions)[max(0, len(self._subscriptions) - count) :]
        for subscription in newest:
            subscription.end(cut_off=True)
            self._forget(subscription)
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
            self._per_link.clear()
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
        await task_cancel(reporter)
        if self._relay is not None:
            await self._relay.close()

    async def _stop_reader(self) -> None:
        task, self._task = self._task, None
        await task_cancel(task)

    async def _read_or_follow(self, sources: tuple[Upstream, ...]) -> None:
        """Without a relay, read the sources. With one, read them while this process owns the
        upstream, and otherwise follow the owner's chunks; try to take over whenever the owner
        is gone."""
        relay = self._relay
        if relay is None:
            await self._failover.play(sources)
            return
        while True:
            cancellation_check()  # a switch that redis-py's wait_for lost stops the loop still
            try:
                if await relay.own():
                    cancellation_check()
                    await self._read_while_owner(relay, sources)
                else:
                    async for data in relay.follow(self._generation):
                        cancellation_check()
                        self._push(data)
            except RelayError as error:
                logger.warning("relay: %s; trying again in %.1fs", error, relay.renew_seconds)
                await asyncio.sleep(relay.renew_seconds)

    async def _read_while_owner(self, relay: Relay, sources: tuple[Upstream, ...]) -> None:
        reader = asyncio.create_task(self._failover.play(sources))
        try:
            while not reader.done():
                await asyncio.sleep(relay.renew_seconds)
                owned = await relay.own()
                cancellation_check()
                if not owned:
                    logger.warning("relay: another process owns the upstream now")
                    return
        finally:
            await task_cancel(reader)

    def _push(self, data: bytes) -> None:
        self.streamed_bytes += len(data)
        self._gop.feed(data)
        self.hls.feed(data)
        self._fit_bursts(len(data))
        for subscription in self._subscriptions:
            subscription.push(data)

    async def deliver(self, data: bytes) -> None:
        """(:class:`FailoverOutput`) To this process's viewers, and through the relay to the
        other processes', on one time line whatever plays; a change of stream reported once
        these bytes of it are out (a player started for it gets them from the GOP cache)."""
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
            await self.report(HubEvent.STREAM, self._sources, self.playing_index, told)

    def stream_begins(self) -> None:
        """(:class:`FailoverOutput`) Another stream goes out to the viewers from the next chunk
        on (a source, the slate):
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

    async def report(
        self,
        event: HubEvent,
        sources: tuple[Upstream, ...],
        index: int | None,
        detail: str,
        *,
        failover: bool = False,
    ) -> None:
        """(:class:`FailoverOutput`) To the owner, with the switch it belongs to."""
        if self._on_event is None:
            return
        try:
            await self._on_event(
                HubReport(event, sources, index, detail, failover, self._generation)
            )
        except Exception:
            logger.exception("hub event handler failed for %s", event)
