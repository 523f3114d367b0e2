"""Failover on what the picture shows, in the hub, against a real loopback origin of real
MPEG-TS: a source that freezes, goes black or shows a still card gives way to the next within
the configured seconds (+3 s), saying why; a source excluded from the checks (the silent-audio
check's too), or a check set to 0, keeps playing."""

from __future__ import annotations

import asyncio

import pytest

from channels_admin.streaming.audio_watch import AUDIO_OFF, AudioChecks
from channels_admin.streaming.hub import Hub
from channels_admin.streaming.hub_events import HubEvent, HubReport
from channels_admin.streaming.picture_watch import PictureChecks
from channels_admin.streaming.sources import Upstream
from loopback_fakes.media_upstream import Behaviour, MediaUpstream
from tests.channels_admin.streaming.test_failover import until

SECONDS = 2
CHECKS = PictureChecks(frozen_seconds=SECONDS, black_seconds=SECONDS, interval_seconds=0.5)
MARGIN = 3.0  # the target: the backup's first picture within the configured seconds + 3 s


@pytest.fixture(scope="module")
def origin():
    server = MediaUpstream()
    yield server
    server.close()


class Timeline:
    """The hub's reports, each with when it came (monotonic, as the origin's times)."""

    def __init__(self) -> None:
        self.reports: list[tuple[float, HubReport]] = []

    async def __call__(self, report: HubReport) -> None:
        if report.event is not HubEvent.STREAM:
            self.reports.append((asyncio.get_running_loop().time(), report))

    def seen(self) -> list[tuple[HubEvent, str, str]]:
        return [(r.event, r.label, r.detail) for _, r in self.reports]

    def at(self, event: HubEvent, label: str) -> float:
        return next(t for t, r in self.reports if (r.event, r.label) == (event, label))


def hub_for(
    timeline: Timeline, checks: PictureChecks = CHECKS, audio_checks: AudioChecks = AUDIO_OFF
) -> Hub:
    return Hub(
        connect_timeout=2,
        stall_timeout=2,
        viewer_buffer_bytes=16 * 1024 * 1024,
        on_event=timeline,
        backoff_initial=0.2,
        backoff_max=1.0,
        key_frame_timeout=3,
        slate_delay=0.3,
        picture_checks=checks,
        audio_checks=audio_checks,
    )


def paths(origin: MediaUpstream, tag: str) -> tuple[str, str]:
    """Paths of this test's own (the origin is shared): a primary and a backup."""
    return f"/{tag}-a.ts", f"/{tag}-b.ts"


async def failed_over_when_the_picture_changes(
    origin: MediaUpstream, tag: str, behaviour: Behaviour
) -> tuple[Timeline, float]:
    """Play a primary and its backup, change the primary's picture as ``behaviour`` does once
    it has played a while; the hub's reports, and the seconds from the change to the backup's
    first picture."""
    primary, backup = paths(origin, tag)
    timeline = Timeline()
    hub = hub_for(timeline)
    await hub.switch([Upstream(origin.url(primary)), Upstream(origin.url(backup))])
    try:
        await until(lambda: hub.playing_index == 0, what="the primary plays")
        await asyncio.sleep(1.5)  # a few of its moving pictures judged
        origin.behave(primary, behaviour)
        await until(lambda: hub.playing_index == 1, within=SECONDS + 6, what="the backup plays")
    finally:
        await hub.close()
    return timeline, timeline.at(HubEvent.FLOWING, "backup 2 of 2") - origin.changed[primary]


async def test_a_primary_that_freezes_fails_over_within_the_frozen_seconds(origin):
    timeline, seconds = await failed_over_when_the_picture_changes(
        origin, "freeze", Behaviour.FREEZE
    )

    assert timeline.seen() == [
        (HubEvent.FLOWING, "primary", ""),
        (HubEvent.DOWN, "primary", "frozen picture for 2 s"),
        (HubEvent.FLOWING, "backup 2 of 2", ""),
    ]
    assert SECONDS <= seconds <= SECONDS + MARGIN


async def test_a_primary_that_goes_black_fails_over_within_the_black_seconds(origin):
    timeline, seconds = await failed_over_when_the_picture_changes(origin, "black", Behaviour.BLACK)

    assert timeline.seen() == [
        (HubEvent.FLOWING, "primary", ""),
        (HubEvent.DOWN, "primary", "black picture for 2 s"),
        (HubEvent.FLOWING, "backup 2 of 2", ""),
    ]
    assert SECONDS <= seconds <= SECONDS + MARGIN


async def test_a_primary_that_shows_a_still_card_from_the_start_fails_as_frozen(origin):
    primary, backup = paths(origin, "card")
    origin.behave(primary, Behaviour.CARD)
    timeline = Timeline()
    hub = hub_for(timeline)

    await hub.switch([Upstream(origin.url(primary)), Upstream(origin.url(backup))])
    try:
        await until(lambda: hub.playing_index == 1, within=SECONDS + 6, what="the backup plays")
    finally:
        await hub.close()

    assert timeline.seen() == [
        (HubEvent.FLOWING, "primary", ""),
        (HubEvent.DOWN, "primary", "frozen picture for 2 s"),
        (HubEvent.FLOWING, "backup 2 of 2", ""),
    ]
    # judged from its first picture on: not sooner
    first = timeline.at(HubEvent.FLOWING, "primary")
    assert SECONDS <= timeline.at(HubEvent.DOWN, "primary") - first <= SECONDS + MARGIN


async def plays_on(origin: MediaUpstream, hub: Hub, source: Upstream) -> None:
    """Play ``source`` (and a backup) for three times the checks' seconds."""
    await hub.switch([source, Upstream(origin.url("/spare.ts"))])
    try:
        await until(lambda: hub.playing_index == 0, what="the source plays")
        await asyncio.sleep(3 * SECONDS)
        assert hub.playing_index == 0
    finally:
        await hub.close()


async def test_a_source_excluded_from_the_checks_keeps_playing_a_still_card_or_silence(origin):
    # a still channel's exclusion covers the silent-audio check too
    origin.behave("/excluded.ts", Behaviour.CARD)
    origin.behave("/excluded-silent.ts", Behaviour.SILENT)
    card, silent = Timeline(), Timeline()
    audio_on = AudioChecks(silent_seconds=SECONDS)

    # both at once: each hub has a connection of its own
    await asyncio.gather(
        plays_on(origin, hub_for(card), Upstream(origin.url("/excluded.ts"), picture_checks=False)),
        plays_on(
            origin,
            hub_for(silent, audio_checks=audio_on),
            Upstream(origin.url("/excluded-silent.ts"), picture_checks=False),
        ),
    )

    assert card.seen() == [(HubEvent.FLOWING, "primary", "")]
    assert silent.seen() == [(HubEvent.FLOWING, "primary", "")]


async def test_a_check_set_to_zero_lets_its_picture_play(origin):
    origin.behave("/still.ts", Behaviour.CARD)
    origin.behave("/dark.ts", Behaviour.BLACK)
    still, dark = Timeline(), Timeline()
    frozen_off = PictureChecks(frozen_seconds=0, black_seconds=SECONDS, interval_seconds=0.5)
    black_off = PictureChecks(frozen_seconds=SECONDS, black_seconds=0, interval_seconds=0.5)

    # both at once: each hub has a connection of its own
    await asyncio.gather(
        plays_on(origin, hub_for(still, frozen_off), Upstream(origin.url("/still.ts"))),
        plays_on(origin, hub_for(dark, black_off), Upstream(origin.url("/dark.ts"))),
    )

    assert still.seen() == [(HubEvent.FLOWING, "primary", "")]
    assert dark.seen() == [(HubEvent.FLOWING, "primary", "")]  # black is not frozen either
