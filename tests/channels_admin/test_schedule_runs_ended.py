"""Every switch of the schedule ends its row: one that fails for any reason is recorded failed
with the reason, one cut short by the server's stop as interrupted, and one that a killed
process left running is ended by the runner's next look.

The switch's failures (a timeout, a database error) and its hang are made by standing in for
``channel_switch_recorded``, the one call of the runner that reaches the hub: the failures it
meets in the field (Redis or the database gone) cannot be made on cue. The kill itself, a row
left running by a server that died, is tested against the real server in
``test_schedule_server.py``."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError, connections
from django.utils import timezone

from channels_admin.models import ScheduleEntry, ScheduleRun
from channels_admin.schedule_times import Action, Event
from channels_admin.services import schedule_runner
from channels_admin.services.schedule_runner import (
    Due,
    schedule_runs_interrupted_end,
    schedule_switch,
)
from core.cancellation import task_cancel

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
async def connections_closed_after():
    yield
    await sync_to_async(connections.close_all)()


async def due_now() -> Due:
    now = timezone.now()
    entry = await ScheduleEntry.objects.acreate(
        channel_id="news", kind="once", at=now, edited_at=now - dt.timedelta(minutes=1)
    )
    return Due(entry, Event(now, Action.START, now), late=False)


def switch_raising(error: BaseException):
    async def switch(**_):
        raise error

    return switch


@pytest.mark.parametrize(
    ("error", "detail"),
    [
        (TimeoutError(), "TimeoutError"),
        (OperationalError("database is locked"), "OperationalError: database is locked"),
        (RuntimeError("x" * 600), f"RuntimeError: {'x' * 486}"),  # the row's 500 characters
    ],
)
async def test_a_switch_that_fails_is_recorded_failed_with_its_reason(monkeypatch, error, detail):
    monkeypatch.setattr(schedule_runner, "channel_switch_recorded", switch_raising(error))
    due = await due_now()

    run = await schedule_switch(due=due)

    stored = await ScheduleRun.objects.aget()
    assert (run.pk, stored.outcome, stored.detail) == (stored.pk, "failed", detail)


async def test_a_switch_cut_short_by_the_servers_stop_is_recorded_interrupted(monkeypatch):
    started = asyncio.Event()

    async def switch_hanging(**_):
        started.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(schedule_runner, "channel_switch_recorded", switch_hanging)
    switching = asyncio.create_task(schedule_switch(due=await due_now()))
    await asyncio.wait_for(started.wait(), 10)
    assert (await ScheduleRun.objects.aget()).outcome == "running"

    # the server stops: it cancels the runner, and asks again every half second while it runs
    began = asyncio.get_running_loop().time()
    await task_cancel(switching)
    took = asyncio.get_running_loop().time() - began

    stored = await ScheduleRun.objects.aget()
    assert (stored.outcome, stored.detail) == ("failed", "interrupted: the server stopped")
    assert switching.cancelled()
    assert took < schedule_runner.INTERRUPTED_WRITE_SEC + 0.5


async def test_rows_left_running_longer_than_the_bound_are_ended_and_younger_ones_kept(settings):
    settings.CHANNELS_SWITCH_TIMEOUT_SEC = 10
    now = timezone.now()
    entry = await ScheduleEntry.objects.acreate(
        channel_id="news", kind="once", at=now, edited_at=now
    )

    def run(seconds_ago: float, outcome: str = "running") -> ScheduleRun:
        at = now - dt.timedelta(seconds=seconds_ago)
        return ScheduleRun(
            entry=entry, due_at=at, action="start", slot_start=at, claimed_at=at, outcome=outcome
        )

    # the bound is the switch's timeout and a minute: 70 s
    await ScheduleRun.objects.abulk_create(
        [run(71), run(3600), run(69), run(3000, outcome="switched")]
    )

    ended = await sync_to_async(schedule_runs_interrupted_end)(now=now)

    rows = [
        (round((now - r.claimed_at).total_seconds()), r.outcome, r.detail)
        async for r in ScheduleRun.objects.order_by("claimed_at")
    ]
    assert ended == 2
    assert rows == [
        (3600, "failed", "interrupted: the server making it stopped before it ended"),
        (3000, "switched", ""),
        (71, "failed", "interrupted: the server making it stopped before it ended"),
        (69, "running", ""),
    ]
