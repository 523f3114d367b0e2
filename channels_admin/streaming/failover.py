"""The failover loop: a channel's sources played one connection at a time, the next when the one
that plays fails, the slate while none does.

A source fails on a connection or HTTP error, when it sends nothing for the stall timeout, when
its own clock falls behind real time over a window (``pace.py``), when it sends no key frame in
time, when its picture stays frozen or black (``picture_watch.py``), when its sound stays
silent (``audio_watch.py``; off by default; the slate is never judged by either), or when it
ends. The loop then fails over to the next source at once (``sources.py``:
round the list, each source with its own capped backoff), still over one connection at a time:
it never probes a source in the background. Viewers stay connected: the slate (``slate.py``)
plays while no source does, and each source starts from its first key frame
(``key_frame_gate.py``); each start is another stream for the fan-out (its timestamps shifted to
go on from the last ones sent, by the hub's ``restamp.py``).

The loop knows nothing of viewers: it hands its bytes and its news to a :class:`FailoverOutput`
(the hub).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

import aiohttp

from channels_admin.streaming.audio_watch import AUDIO_OFF, AudioChecks, AudioWatch
from channels_admin.streaming.failure_reasons import failure_detail, failure_reason
from channels_admin.streaming.hls_input import HlsError, HlsReader
from channels_admin.streaming.hub_events import HubEvent
from channels_admin.streaming.key_frame_gate import KeyFrameGate
from channels_admin.streaming.pace import PaceMeter
from channels_admin.streaming.picture_watch import OFF, PictureChecks, PictureWatch
from channels_admin.streaming.slate import Slate
from channels_admin.streaming.sources import SourceCycle, Upstream, source_label
from channels_admin.streaming.ts_scan import StreamLayout
from channels_admin.streaming.upstream_reader import UpstreamError, UpstreamReader

logger = logging.getLogger(__name__)

PLAYING_REPORT_SECONDS = 5.0  # what is playing is reported when it changes, at most this often
SLOW_WINDOW_SECONDS = 10.0  # a source behind real time over this long has failed
KEY_FRAME_TIMEOUT_SECONDS = 10.0  # a source without a key frame this long after connecting too
SLATE_DELAY_SECONDS = 1.0  # a switch's first source may take this long before the slate plays


class FailoverOutput(Protocol):
    """Where the loop's bytes and news go: the hub, which supplies itself."""

    async def deliver(self, data: bytes) -> None:
        """Whole packets of what plays (a source or the slate), to the viewers."""

    def stream_begins(self) -> None:
        """Another stream (a source, the slate) goes out from the next chunk on."""

    async def report(
        self,
        event: HubEvent,
        sources: tuple[Upstream, ...],
        index: int | None,
        detail: str,
        *,
        failover: bool = False,
    ) -> None:
        """A source plays, what plays changed, or a source failed."""


class Failover:
    """Plays one channel's sources at a time (:meth:`play`, until cancelled)."""

    def __init__(
        self,
        output: FailoverOutput,
        reader: UpstreamReader,
        *,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
        hls_max_bandwidth: int | None = None,
        slow_window_seconds: float = SLOW_WINDOW_SECONDS,
        key_frame_timeout: float = KEY_FRAME_TIMEOUT_SECONDS,
        slate_delay: float = SLATE_DELAY_SECONDS,
        slate_pattern: bool = True,
        picture_checks: PictureChecks = OFF,
        audio_checks: AudioChecks = AUDIO_OFF,
    ) -> None:
        self._output = output
        self._picture_checks = picture_checks
        self._audio_checks = audio_checks
        self._reader = reader
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._hls_max_bandwidth = hls_max_bandwidth
        self._slow_window = slow_window_seconds
        self._key_frame_timeout = key_frame_timeout
        self._slate_delay = slate_delay
        self._slate = Slate(output.deliver, pattern=slate_pattern)
        self._layout: StreamLayout | None = None  # the PIDs of the source that played last
        self.playing_index: int | None = None  # the source that plays now, if one does

    @property
    def slate_playing(self) -> bool:
        return self._slate.playing

    async def play(self, sources: tuple[Upstream, ...]) -> None:
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
                    await self._output.report(HubEvent.DOWN, sources, index, reason)
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
                await self._output.report(HubEvent.MISSED, sources, index, reason)
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
            self._output.stream_begins()
            self._slate.start(layout)

    async def _play(
        self, sources: tuple[Upstream, ...], index: int, hls: HlsReader, *, failover: bool
    ) -> tuple[float | None, str, str]:
        """Relay one connection of source ``index`` from its first key frame on: how long it
        played (None: it never started), why it ended (:func:`failure_reason`) and the
        technical detail, for the log. ``failover``: it takes over from another source."""
        loop = asyncio.get_running_loop()
        gate, pace = KeyFrameGate(), PaceMeter(window_seconds=self._slow_window)
        # A still channel's exclusion (``Upstream.picture_checks``) is from both checks.
        judged = sources[index].picture_checks
        picture = PictureWatch(self._picture_checks if judged else OFF, clock=loop.time)
        audio = AudioWatch(self._audio_checks if judged else AUDIO_OFF, clock=loop.time)
        output = self._output
        connected = loop.time()
        started: float | None = None
        received, playing, reported = False, "", 0.0
        try:
            # Closed here, not whenever the collector gets to it: the connection is gone before
            # the next source (or the next switch's) opens one.
            async with contextlib.aclosing(self._reader.read(sources[index], hls)) as reads:
                async for data in reads:
                    received = True
                    pace.feed(data)
                    if started is None:
                        data = gate.feed(data)
                        if not data:
                            if loop.time() - connected > self._key_frame_timeout:
                                raise UpstreamError(
                                    f"no key frame in {self._key_frame_timeout:g} s"
                                )
                            continue
                        await self._slate.stop()
                        output.stream_begins()  # after the slate or the source that failed
                        self._layout = gate.layout
                        started, playing, reported = loop.time(), hls.playing, loop.time()
                        self.playing_index = index
                        await output.report(
                            HubEvent.FLOWING, sources, index, playing, failover=failover
                        )
                    elif (
                        hls.playing != playing and loop.time() - reported >= PLAYING_REPORT_SECONDS
                    ):
                        playing, reported = hls.playing, loop.time()
                        await output.report(HubEvent.PLAYING, sources, index, playing)
                    await output.deliver(data)
                    picture.feed(data)
                    if picture.failed is not None:
                        raise UpstreamError(picture.failed)
                    audio.feed(data)
                    if audio.failed is not None:
                        raise UpstreamError(audio.failed)
                    if pace.slow():
                        raise UpstreamError(
                            f"the upstream sends {pace.ratio():.0%} of real time"
                            f" over {self._slow_window:g} s"
                        )
            reason, detail = "the upstream ended the stream", "the response ended"
        except TimeoutError as error:  # aiohttp's connect and read timeouts are TimeoutErrors too
            reason = (
                f"the upstream stalled (no data for {self._reader.stall_timeout:g} s)"
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
        finally:
            picture.close()
            audio.close()
        return (None if started is None else loop.time() - started), reason, detail
