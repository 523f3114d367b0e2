"""This process's stream runtime: its hub, the admission of its viewers, its demo encoders, and
(with Redis) the listener that makes its hub follow the switches other processes make.

One object per process (:func:`stream_runtime`), because the hub holds the process's ONE
upstream connection: two hubs would open two. The hub itself is built on first use, on the
event loop, since building it resumes the channel that was live before a restart.

The runtime sits below the services, which call it. What it has to tell them goes through
interfaces it owns: what the hub reports goes to the :class:`StreamEvents` the app supplies
(``apps.py``, with ``services/status.py``'s recorder), who may watch comes from the
:class:`ViewerAccess` it supplies (``services/viewer_links.py``), and a switch's outcome is awaited
(:meth:`StreamRuntime.switch_outcome`): it comes from the hub's first picture of the switch,
in this process or, with a relay, in the one that owns the upstream.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass
from typing import Protocol

from channels.db import database_sync_to_async
from django.conf import settings

from channels_admin.demo_channels import demo_entries
from channels_admin.models import StreamState
from channels_admin.streaming.admission import Admission, LoadGuard
from channels_admin.streaming.audio_watch import AudioChecks
from channels_admin.streaming.encoder_slots import DEMO_ENCODERS, EncoderSlots
from channels_admin.streaming.hub import Hub
from channels_admin.streaming.hub_events import HubEvent, HubReport
from channels_admin.streaming.link_audience import LinkAudience, LocalAudience
from channels_admin.streaming.picture_watch import PictureChecks
from channels_admin.streaming.relay import Relay, RelayError
from channels_admin.streaming.segment_signature import SegmentSigner
from channels_admin.streaming.shared_audience import SharedAudience
from channels_admin.streaming.sources import Upstream
from channels_admin.streaming.upstream_addresses import UpstreamAddresses
from core.cancellation import task_cancel

logger = logging.getLogger(__name__)


class StreamEvents(Protocol):
    """What the runtime tells the layer above it, which supplies one."""

    async def hub_reported(self, report: HubReport) -> None:
        """The hub of this process reported ``report`` (with a relay: the owner's hub only)."""


@dataclass(frozen=True)
class AccessRule:
    """Who may watch now: anyone while the stream is open; while it is ``private``, the
    viewers of the viewer ``links`` that admit viewers (not revoked, not expired)."""

    private: bool = False
    links: frozenset[int] = frozenset()
    # when (time.monotonic()) the reading of it began: it holds every change committed before
    read_at: float = 0.0

    def admits(self, link: int | None) -> bool:
        return not self.private or (link is not None and link in self.links)


class ViewerAccess(Protocol):
    """Where the runtime learns who may watch: the layer above supplies one."""

    def rules(self) -> AsyncIterator[AccessRule]:
        """The rule now, then the rule each time it changes (a link revoked or expired, the
        stream made private or open), whichever process changed it."""


class AccessHolder(Protocol):
    """Something held open through a viewer link (a status feed), which the layer above
    registers (:meth:`StreamRuntime.access_hold`): told when the rule no longer admits it."""

    link: int | None  # the viewer link it came through; None: none (the stream was open)

    async def access_lost(self) -> None:
        """The rule no longer admits :attr:`link`: close."""


# A retry after the access rules could not be read (the database away).
ACCESS_RETRY_SEC = 1.0


class SwitchOutcome(enum.Enum):
    PLAYS = "plays"  # a source of the switch showed its first picture
    NO_PICTURE = "no picture"  # none did in the time given
    SUPERSEDED = "superseded"  # another switch came first


class StreamRuntime:
    """The hub (built once, behind a lock), the admission of ``/ts`` viewers, the demo
    channels' encoders, and the switch listener; :meth:`close` ends them for a server shutdown
    (a later use builds a new hub)."""

    def __init__(self, *, events: StreamEvents, access: ViewerAccess | None = None) -> None:
        self.admission = Admission(max_viewers=settings.CHANNELS_MAX_VIEWERS)
        self.demo_slots = EncoderSlots(
            total=DEMO_ENCODERS, per_client=settings.CHANNELS_DEMO_STREAMS_PER_CLIENT
        )
        self._events = events
        self._access = access
        # who may watch, as this process last learned (the stream is open until then)
        self.access_rule = AccessRule()
        # viewer links the database admitted (a token checked, at a time.monotonic()) that the
        # rule may not list yet, the change still on its way: a rule read after the check
        # decides for them
        self._links_checked: dict[int, float] = {}
        self._access_follower: asyncio.Task[None] | None = None
        self._access_holders: set[AccessHolder] = set()
        # who watches through each viewer link: this process's, or with Redis every process's
        self.link_audience: LinkAudience = LocalAudience()
        # signs the HLS segment URIs, as nginx checks them (docs/deploy.md)
        self.segment_signer = SegmentSigner(secret=settings.CHANNELS_SEGMENT_SECRET)
        self._hub: Hub | None = None
        self._hub_ready: asyncio.Lock | None = None
        self._switch_listener: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        # The latest switch this process knows of, and how it went (done at its first picture)
        self._switch: tuple[str, asyncio.Future[SwitchOutcome]] | None = None

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
        if relay is not None:
            self.link_audience = SharedAudience(
                settings.REDIS_URL,
                prefix=settings.CHANNELS_RELAY_PREFIX,
                identity=relay.identity,
                expiry_seconds=settings.CHANNELS_RELAY_LOCK_SEC,
            )
        hub = Hub(
            connect_timeout=settings.CHANNELS_UPSTREAM_CONNECT_TIMEOUT_SEC,
            stall_timeout=settings.CHANNELS_STALL_TIMEOUT,
            viewer_buffer_bytes=settings.CHANNELS_VIEWER_BUFFER_BYTES,
            on_event=self._hub_reported,
            relay=relay,
            hls_max_bandwidth=settings.CHANNELS_HLS_MAX_BANDWIDTH,
            gop_cache_bytes=settings.CHANNELS_GOP_CACHE_BYTES,
            gop_cache_seconds=settings.CHANNELS_GOP_CACHE_SEC,
            slate_pattern=settings.CHANNELS_SLATE,
            upstream_addresses=upstream_addresses(),
            picture_checks=PictureChecks(
                frozen_seconds=settings.CHANNELS_FROZEN_SEC,
                black_seconds=settings.CHANNELS_BLACK_SEC,
                interval_seconds=settings.CHANNELS_PICTURE_CHECK_SEC,
            ),
            audio_checks=AudioChecks(silent_seconds=settings.CHANNELS_SILENT_SEC),
        )
        state = await database_sync_to_async(StreamState.load)()
        if state.live and state.source_list:
            self._switch_begun(state.generation)
            await hub.switch(state.upstreams, state.generation)
        if relay is not None:
            self._switch_listener = asyncio.create_task(relay.listen(self._announced))
        guard = LoadGuard(hub)
        guard.start()
        self.admission.guard = guard
        if self._access is not None:
            rules = aiter(self._access.rules())
            self._rule_applied(await anext(rules))
            self._access_follower = asyncio.create_task(self._follow_access(hub, rules))
        return hub

    async def _follow_access(self, hub: Hub, rules: AsyncIterator[AccessRule]) -> None:
        """Apply each new rule: the viewers it no longer admits are cut off (their stream
        ends, and their player's next request is refused)."""
        while True:
            try:
                async for rule in rules:
                    self._rule_applied(rule)
                    cut = hub.end_viewers(self.admits)
                    if cut:
                        logger.info("cut off %d viewers whose link no longer admits them", cut)
                    await self._holders_cut()
            except Exception:
                logger.exception("the viewer access rules could not be read; trying again")
            await asyncio.sleep(ACCESS_RETRY_SEC)
            rules = aiter(self._access.rules())

    def _rule_applied(self, rule: AccessRule) -> None:
        self.access_rule = rule
        self._links_checked = {
            link: at for link, at in self._links_checked.items() if at > rule.read_at
        }

    def link_checked(self, link: int, at: float) -> None:
        """The database admitted ``link`` (its token checked, done at ``at``, a
        time.monotonic()): until a rule read after that says otherwise, this process admits it
        whether or not its rule lists it yet (a link just made, whose announcement is still on
        its way)."""
        if link not in self.access_rule.links:
            self._links_checked[link] = max(at, self._links_checked.get(link, at))

    def admits(self, link: int | None) -> bool:
        """Whether the viewers of ``link`` (None: of none) may watch, as this process knows."""
        return self.access_rule.admits(link) or (link is not None and link in self._links_checked)

    def access_hold(self, holder: AccessHolder) -> None:
        """Tell ``holder`` when the rule no longer admits its link, until released."""
        self._access_holders.add(holder)

    def access_release(self, holder: AccessHolder) -> None:
        self._access_holders.discard(holder)

    async def _holders_cut(self) -> None:
        """Tell the holders the rule no longer admits (and forget them)."""
        lost = [holder for holder in self._access_holders if not self.admits(holder.link)]
        for holder in lost:
            self._access_holders.discard(holder)
            try:
                await holder.access_lost()
            except Exception:
                logger.exception("a holder of a viewer link could not be told it was cut off")
        if lost:
            logger.info("closed %d status feeds whose link no longer admits them", len(lost))

    async def switch(self, sources: Sequence[Upstream], generation: str) -> None:
        """Point this process's hub at a channel's ``sources`` (the primary first), the switch
        called ``generation``, and tell the other processes' hubs."""
        hub = await self.hub()
        self._switch_begun(generation)
        # A hub this call built (the process's first) has resumed the switch as recorded, this
        # one already: switching again would drop its upstream connection and open another.
        if not generation or hub.generation != generation:
            await hub.switch(sources, generation)
        if hub.relay is not None:
            records = [source.as_record() for source in sources]
            await hub.relay.announce({"sources": records, "generation": generation})

    async def switch_outcome(self, generation: str, *, within: float) -> SwitchOutcome:
        """How the switch ``generation`` (made by :meth:`switch`) went: it showed a picture
        within ``within`` seconds, or not, or another switch came meanwhile."""
        switch = self._switch
        if switch is None or switch[0] != generation:
            return SwitchOutcome.SUPERSEDED
        try:
            return await asyncio.wait_for(asyncio.shield(switch[1]), within)
        except TimeoutError:
            return SwitchOutcome.NO_PICTURE

    def watch(self, outcome: Coroutine[None, None, None]) -> None:
        """Run ``outcome`` (what follows a switch) in the background, in place of the last
        switch's, which a new switch makes moot."""
        if self._watch is not None and self._watch is not asyncio.current_task():
            self._watch.cancel()
        self._watch = asyncio.create_task(outcome)

    def _switch_begun(self, generation: str) -> None:
        """The switch ``generation`` is the latest: the one before it is superseded."""
        if self._switch is not None:
            if self._switch[0] == generation:
                return
            self._switch_ended(SwitchOutcome.SUPERSEDED)
        self._switch = (generation, asyncio.get_running_loop().create_future())

    def _switch_ended(self, outcome: SwitchOutcome, generation: str | None = None) -> None:
        """The latest switch (if it is ``generation``) went as ``outcome``."""
        switch = self._switch
        if switch is None or (generation is not None and switch[0] != generation):
            return
        if not switch[1].done():
            switch[1].set_result(outcome)

    async def _hub_reported(self, report: HubReport) -> None:
        """The hub's events: to the app first (the status records them), then, at a switch's
        first picture, to whoever awaits its outcome, in every process."""
        try:
            await self._events.hub_reported(report)
        except Exception:
            logger.exception("the stream's events failed for %s", report.event)
        if report.event is not HubEvent.FLOWING:
            return
        self._switch_ended(SwitchOutcome.PLAYS, report.generation)
        relay = self._hub.relay if self._hub is not None else None
        if relay is not None:
            try:
                await relay.announce({"flowing": report.generation})
            except RelayError as error:
                logger.warning("relay: could not announce the switch's picture: %s", error)

    async def _announced(self, message: dict) -> None:
        """What any process announced (this one too): a switch, which this process's hub
        follows unless it made it; or a switch's first picture."""
        if "flowing" in message:
            self._switch_ended(SwitchOutcome.PLAYS, message["flowing"])
            return
        hub = self._hub
        if hub is not None and hub.generation != message["generation"]:
            self._switch_begun(message["generation"])
            sources = [Upstream.from_record(record) for record in message["sources"]]
            await hub.switch(sources, message["generation"])

    async def close(self) -> None:
        """Close the upstream connection and end the viewers (server shutdown, tests)."""
        hub, self._hub = self._hub, None
        listener, self._switch_listener = self._switch_listener, None
        watch, self._watch = self._watch, None
        follower, self._access_follower = self._access_follower, None
        await task_cancel(follower)
        self._switch_ended(SwitchOutcome.SUPERSEDED)
        self._switch = None
        if watch is not None:
            watch.cancel()
        await task_cancel(listener)
        if hub is not None:
            await hub.close()
        guard, self.admission.guard = self.admission.guard, None
        if guard is not None:
            await guard.stop()
        audience, self.link_audience = self.link_audience, LocalAudience()
        await audience.close()


_runtime: StreamRuntime | None = None


def stream_runtime_install(runtime: StreamRuntime) -> None:
    """Make ``runtime`` this process's (``apps.py``, as the app starts)."""
    global _runtime
    _runtime = runtime


def stream_runtime() -> StreamRuntime:
    """This process's stream runtime, as the app installed it."""
    if _runtime is None:
        raise RuntimeError("no stream runtime: the channels_admin app installs it as it starts")
    return _runtime


def upstream_addresses() -> UpstreamAddresses:
    """Where the hub may connect, from the settings; the demo channels' URLs are the server's
    own, written by it."""
    return UpstreamAddresses(
        deny=settings.CHANNELS_UPSTREAM_DENY,
        allow=settings.CHANNELS_UPSTREAM_ALLOW,
        trusted_urls=frozenset(entry.url for entry in demo_entries()),
    )
