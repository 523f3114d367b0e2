"""The stream runtime tells the layer above it through its own interfaces: what the hub
reports goes to the ``StreamEvents`` it was given, and a switch's outcome comes from the hub's
first picture of it (in this process, or announced by the process that owns the upstream),
against a real loopback origin of real MPEG-TS."""

from __future__ import annotations

import asyncio

import pytest
from django.utils import timezone

from channels_admin.models import StreamState
from channels_admin.runtime import AccessRule, StreamRuntime, SwitchOutcome
from channels_admin.streaming.hub_events import HubEvent, HubReport
from channels_admin.streaming.sources import Upstream
from loopback_fakes.media_upstream import Behaviour, MediaUpstream

pytestmark = pytest.mark.django_db(transaction=True)


class Recorder:
    """A ``StreamEvents`` that keeps what it is told."""

    def __init__(self) -> None:
        self.reports: list[HubReport] = []

    async def hub_reported(self, report: HubReport) -> None:
        self.reports.append(report)


@pytest.fixture
def origin():
    server = MediaUpstream()
    yield server
    server.close()


@pytest.fixture
async def runtime():
    recorder = Recorder()
    runtime = StreamRuntime(events=recorder)
    yield runtime, recorder
    await runtime.close()


async def test_a_switch_plays_at_its_first_picture_told_to_the_events_first(origin, runtime):
    runtime, recorder = runtime

    await runtime.switch([Upstream(origin.url("/a.ts"))], "g1")
    outcome = await runtime.switch_outcome("g1", within=10)

    assert outcome is SwitchOutcome.PLAYS
    assert [(r.event, r.label, r.generation) for r in recorder.reports][:1] == [
        (HubEvent.FLOWING, "primary", "g1")
    ]


async def test_a_switch_without_a_picture_in_time_has_none(origin, runtime):
    runtime, recorder = runtime
    origin.behaviour["/a.ts"] = Behaviour.REFUSE

    await runtime.switch([Upstream(origin.url("/a.ts"))], "g1")
    outcome = await runtime.switch_outcome("g1", within=0.5)

    assert outcome is SwitchOutcome.NO_PICTURE
    assert HubEvent.FLOWING not in {r.event for r in recorder.reports}


async def test_a_switch_that_another_follows_is_superseded(origin, runtime):
    runtime, _ = runtime
    origin.behaviour["/a.ts"] = Behaviour.REFUSE
    await runtime.switch([Upstream(origin.url("/a.ts"))], "g1")
    waiting = asyncio.create_task(runtime.switch_outcome("g1", within=10))
    await asyncio.sleep(0)

    await runtime.switch([Upstream(origin.url("/b.ts"))], "g2")

    assert await waiting is SwitchOutcome.SUPERSEDED
    assert await runtime.switch_outcome("g1", within=10) is SwitchOutcome.SUPERSEDED


async def test_a_first_picture_another_process_announces_ends_the_wait(origin, runtime):
    # given a switch whose upstream this process does not read (the owner is another process)
    runtime, _ = runtime
    origin.behaviour["/a.ts"] = Behaviour.REFUSE
    await runtime.switch([Upstream(origin.url("/a.ts"))], "g1")
    waiting = asyncio.create_task(runtime.switch_outcome("g1", within=10))

    # when the owner's news of its first picture comes over the relay (an older switch's first)
    await runtime._announced({"flowing": "g0"})
    await runtime._announced({"flowing": "g1"})

    # then the switch plays
    assert await waiting is SwitchOutcome.PLAYS


async def test_a_switch_the_hub_resumed_as_it_was_built_keeps_its_connection(origin, runtime):
    # given a switch recorded (as the switch service records it before it tells the runtime)
    # and the process's hub built meanwhile, which resumed it (a viewer came first)
    runtime, _ = runtime
    url = origin.url("/a.ts")
    started = timezone.now()
    await StreamState.objects.acreate(
        pk=StreamState.SINGLETON_PK,
        channel_id="a",
        channel_name="A",
        live=True,
        sources=[{"url": url, "headers": {}}],
        switch_started_at=started,
    )
    hub = await runtime.hub()
    await wait_for_connections(origin, "/a.ts", 1)

    # when the runtime is told of that switch
    await runtime.switch([Upstream(url)], started.isoformat())
    outcome = await runtime.switch_outcome(started.isoformat(), within=10)

    # then it plays on the connection it has: within a second (a new connection to the origin
    # on loopback takes milliseconds) the upstream still saw one, open
    await asyncio.sleep(1)
    assert (outcome, hub.generation) == (SwitchOutcome.PLAYS, started.isoformat())
    assert [connection.closed for connection in origin.connections] == [None]


async def wait_for_connections(origin: MediaUpstream, path: str, count: int) -> None:
    for _ in range(200):
        if len([c for c in origin.connections if c.path == path]) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path}: fewer than {count} connections within 10 s")


class QueuedAccess:
    """A ``ViewerAccess`` whose rules the test gives one at a time."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[AccessRule] = asyncio.Queue()

    async def rules(self):
        while True:
            yield await self.queue.get()


async def rule_followed(runtime: StreamRuntime, access: QueuedAccess, rule: AccessRule) -> None:
    access.queue.put_nowait(rule)
    for _ in range(100):
        if runtime.access_rule is rule:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the rule was not followed")


async def test_a_link_checked_before_the_rule_lists_it_is_admitted_until_a_later_read_decides():
    # given a private stream whose rule, read at 10, lists link 1
    access = QueuedAccess()
    runtime = StreamRuntime(events=Recorder(), access=access)
    access.queue.put_nowait(AccessRule(private=True, links=frozenset({1}), read_at=10.0))
    await runtime.hub()
    try:
        # when link 2, made after that read, has its token checked at 11 (its playlist asked
        # for before the announcement of its making reached this process)
        runtime.link_checked(2, 11.0)

        # then it is admitted, and links neither listed nor checked are not
        assert [runtime.admits(link) for link in (1, 2, 3, None)] == [True, True, False, False]
        # and a rule whose read began before the check leaves it admitted; one begun after the
        # check decides (here: revoked meanwhile)
        await rule_followed(
            runtime, access, AccessRule(private=True, links=frozenset({1}), read_at=10.5)
        )
        assert runtime.admits(2)
        await rule_followed(
            runtime, access, AccessRule(private=True, links=frozenset({1}), read_at=11.5)
        )
        assert [runtime.admits(link) for link in (1, 2)] == [True, False]
    finally:
        await runtime.close()
