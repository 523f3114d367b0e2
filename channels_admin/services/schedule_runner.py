"""The schedule's runner: an asyncio task of the server that makes the schedule's switches at
their times, through the same switch as a person's (``services/switch.py``), so that failover,
the return when a channel shows no picture, the log and the status's sentence are the same.

- **One process runs it.** With ``REDIS_URL`` the holder of a Redis lease
  (``core/redis_lease.py``, ``<CHANNELS_SCHEDULE_PREFIX>:runner``) runs it; the others look for
  the lease every third of its expiry and take it when its holder died. Without Redis the one
  process runs it.
- **Each switch once.** A switch is a row of :class:`ScheduleRun`, unique per entry, time and
  action, inserted before the switch is made: a second process, or a restart, finds the row and
  makes no second switch. (A process that dies between the row and the switch loses that
  switch; it never makes it twice.)
- **Every switch ends its row.** A switch that fails for any reason is recorded ``failed``
  with the reason; one cut short by the server stopping, ``failed`` "interrupted: the server
  stopped" (written as the task is cancelled, within :data:`INTERRUPTED_WRITE_SEC`). A row
  still ``running`` :data:`INTERRUPTED_AFTER` after it was claimed was left by a process that was
  killed mid-switch: the runner ends it, ``failed`` too, at its next look.
- **Missed switches.** After a restart, the switches that came due while the server was down
  (later than ``CHANNELS_SCHEDULE_MISSED_SEC``) are taken up or skipped, as their entry says:
  taken up only while their slot lasts (until the entry's end; without one, until the next
  switch of the schedule and ``CHANNELS_SCHEDULE_GRACE_SEC`` at most), and not when a switch
  was made since they came due. Either way a row records what was done.
- **A person's switch wins until the next entry.** The runner acts at the entries' times only
  and never asserts its channel again; the end of an entry goes back only if the channel is
  still the one its start switched to (the same switch: a person's switch since, or the hub's
  own return from a channel that showed no picture, ends the entry's claim).
- It sleeps until the next switch due, waking early when the entries change (a message on the
  channel layer's ``schedule-changed`` group, which the API and the Django admin send) and at
  least every few seconds (:data:`POLL_SEC`, or the lease's renewal).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from dataclasses import dataclass

import redis
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from channels_admin.errors import ChannelNotFound, UnsupportedStream
from channels_admin.models import ScheduleEntry, ScheduleRun, StreamState
from channels_admin.schedule_times import Action, Event, events
from channels_admin.selectors import schedule_zone
from channels_admin.services.schedule import SCHEDULE_GROUP
from channels_admin.services.switch import channel_switch_recorded
from core.cancellation import cancellation_check
from core.redis_lease import RedisLease

logger = logging.getLogger(__name__)

POLL_SEC = 5.0  # the longest sleep without Redis: entries changed where no message reached
LOOK_BACK = dt.timedelta(days=8)  # switches missed longer ago than this are forgotten
GROUP_RENEW_SEC = 3600  # the channel layer forgets a group's members after a day
# A switch call records the row and points the hubs at the channel; it does not wait for the
# picture (that is the switch's watch, CHANNELS_SWITCH_TIMEOUT_SEC). A row still running after
# that timeout and this margin more is no switch under way: no process is making it any more.
# The margin is generous (database and Redis round trips take well under a second; a busy
# SQLite waits 5 s for its lock) so that a slow switch in another process is never ended as
# interrupted while it runs.
INTERRUPTED_MARGIN_SEC = 60
# The most a switch cut short by the server's stop waits to record so: under the 2 s the server
# gives its background tasks to end (edge/server.py's BACKGROUND_STOP_SEC).
INTERRUPTED_WRITE_SEC = 1.0
INTERRUPTED_STOPPED = "interrupted: the server stopped"
INTERRUPTED_KILLED = "interrupted: the server making it stopped before it ended"
Outcome = ScheduleRun.Outcome


@dataclass(frozen=True)
class Due:
    """A switch of ``entry`` that came due, and whether it is taken up late."""

    entry: ScheduleEntry
    event: Event
    late: bool


@dataclass(frozen=True)
class Looked:
    """What a look at the schedule found: the switches to make now, in order, and when the
    next one comes (None: none within the look-ahead)."""

    due: list[Due]
    next_at: dt.datetime | None


async def schedule_run_forever() -> None:
    """The runner, until cancelled (the server's background task, ``apps.py``)."""
    await ScheduleRunner().run()


class ScheduleRunner:
    def __init__(self) -> None:
        self._wake = asyncio.Event()
        self._lease = (
            RedisLease.at(
                settings.REDIS_URL,
                key=f"{settings.CHANNELS_SCHEDULE_PREFIX}:runner",
                seconds=settings.CHANNELS_SCHEDULE_LOCK_SEC,
            )
            if settings.REDIS_URL
            else None
        )
        self._held = False

    async def run(self) -> None:
        listener = asyncio.create_task(self._listen())
        try:
            while True:
                cancellation_check()  # a stop that redis-py's or our wait_for lost
                self._wake.clear()  # before the look: a change during it wakes the next sleep
                next_at = await self._turn()
                await self._sleep(next_at)
        finally:
            listener.cancel()
            if self._lease is not None:
                await self._lease.close()

    async def _turn(self) -> dt.datetime | None:
        """Make the switches due if this process runs the schedule; when the next one comes."""
        if not await self._hold():
            return None
        try:
            await database_sync_to_async(schedule_runs_interrupted_end)(now=timezone.now())
            looked = await database_sync_to_async(schedule_look)(now=timezone.now())
            for due in looked.due:
                await schedule_switch(due=due)
        except Exception:
            logger.exception("schedule: the look at the schedule failed; trying again")
            return None
        return looked.next_at

    async def _hold(self) -> bool:
        if self._lease is None:
            return True
        try:
            held = await self._lease.hold()
        except redis.RedisError as error:
            logger.warning("schedule: Redis cannot say who runs the schedule (%s)", error)
            held = False
        if held != self._held:
            doing = "runs" if held else "no longer runs"
            logger.info("schedule: this process %s the schedule", doing)
            self._held = held
        return held

    async def _sleep(self, next_at: dt.datetime | None) -> None:
        bound = self._lease.renew_seconds if self._lease is not None else POLL_SEC
        if next_at is not None:
            bound = min(bound, max(0.0, (next_at - timezone.now()).total_seconds()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), bound)

    async def _listen(self) -> None:
        """Wake the runner at each message of the schedule's group, until cancelled."""
        layer = get_channel_layer()
        if layer is None:
            return
        name = await layer.new_channel()
        renewer = asyncio.create_task(_group_renew(layer, name))
        try:
            while True:
                cancellation_check()
                try:
                    await layer.receive(name)
                except Exception as error:  # the layer's Redis went away: the poll goes on
                    logger.warning("schedule: the change feed failed (%s); again in 1 s", error)
                    await asyncio.sleep(1)
                    continue
                self._wake.set()
        finally:
            renewer.cancel()
            with contextlib.suppress(Exception):
                await layer.group_discard(SCHEDULE_GROUP, name)


async def _group_renew(layer: object, name: str) -> None:
    while True:
        cancellation_check()
        try:
            await layer.group_add(SCHEDULE_GROUP, name)
        except Exception as error:
            logger.warning("schedule: could not join the change feed (%s)", error)
            await asyncio.sleep(5)
            continue
        await asyncio.sleep(GROUP_RENEW_SEC)


def interrupted_after() -> dt.timedelta:
    """How long after its claim a row still running is known to be abandoned."""
    return dt.timedelta(seconds=settings.CHANNELS_SWITCH_TIMEOUT_SEC + INTERRUPTED_MARGIN_SEC)


def schedule_runs_interrupted_end(*, now: dt.datetime) -> int:
    """End as failed the rows that a killed process left running (claimed longer ago than
    :func:`interrupted_after`), so that no switch shows as running for ever; how many."""
    ended = ScheduleRun.objects.filter(
        outcome=Outcome.RUNNING, claimed_at__lt=now - interrupted_after()
    ).update(outcome=Outcome.FAILED, detail=INTERRUPTED_KILLED)
    if ended:
        logger.warning("schedule: %d switches left running by a stopped server ended", ended)
    return ended


def schedule_look(*, now: dt.datetime) -> Looked:
    """The switches of the enabled entries that came due by ``now`` and have no row yet, in
    order (at one time, a return before a start: the start wins), each marked late or not;
    those missed that are not to be taken up get their row here (skipped); and when the next
    switch comes."""
    zone = schedule_zone()
    horizon = now + LOOK_BACK  # the look-ahead for the next switch: as far as the look-back
    found: list[tuple[Event, ScheduleEntry]] = []
    for entry in ScheduleEntry.objects.filter(enabled=True):
        after = max(entry.edited_at, now - LOOK_BACK)
        coming = events(entry.rules, zone=zone, after=after, before=horizon)
        found += [(event, entry) for event in coming]
    found.sort(key=lambda item: (item[0].at, item[0].action is Action.START, item[1].pk))
    past = [(event, entry) for event, entry in found if event.at <= now]
    next_at = next((event.at for event, _ in found if event.at > now), None)
    done = set(
        ScheduleRun.objects.filter(
            entry__in={entry.pk for _, entry in past}, due_at__gt=now - LOOK_BACK
        ).values_list("entry_id", "due_at", "action")
    )
    due = []
    missed_after = dt.timedelta(seconds=settings.CHANNELS_SCHEDULE_MISSED_SEC)
    for index, (event, entry) in enumerate(past):
        if (entry.pk, event.at, event.action.value) in done:
            continue
        if now - event.at <= missed_after:
            due.append(Due(entry, event, late=False))
            continue
        why = _why_not_taken_up(entry, event, later=found[index + 1 :], now=now)
        if why is None:
            due.append(Due(entry, event, late=True))
        else:
            _run_record(entry, event, now=now, outcome=Outcome.SKIPPED, detail=why)
    return Looked(due, next_at)


def _why_not_taken_up(
    entry: ScheduleEntry,
    event: Event,
    *,
    later: list[tuple[Event, ScheduleEntry]],
    now: dt.datetime,
) -> str | None:
    """Why a switch missed while the server was down is not made now; None: it is."""
    late = f"missed by {(now - event.at).total_seconds():.0f} s"
    if entry.missed == ScheduleEntry.Missed.SKIP:
        return f"{late}: skipped, as the entry says"
    end = _slot_end(entry, event, later)
    if now >= end:
        return f"{late}: its slot was over"
    return None


def _slot_end(
    entry: ScheduleEntry, event: Event, later: list[tuple[Event, ScheduleEntry]]
) -> dt.datetime:
    """Until when a missed switch is still worth making: a start with an end, until the end;
    else until the schedule's next switch, and the grace at most."""
    if event.action is Action.START and event.slot_end is not None:
        return event.slot_end
    grace = event.at + dt.timedelta(seconds=settings.CHANNELS_SCHEDULE_GRACE_SEC)
    following = next((other.at for other, _ in later if other.at > event.at), None)
    return min(grace, following) if following is not None else grace


def _run_record(
    entry: ScheduleEntry, event: Event, *, now: dt.datetime, outcome: str, detail: str = ""
) -> ScheduleRun | None:
    """The switch's row, claimed; None when another process (or an earlier run) has it."""
    try:
        with transaction.atomic():
            return ScheduleRun.objects.create(
                entry=entry,
                due_at=event.at,
                action=event.action.value,
                slot_start=event.slot_start,
                claimed_at=now,
                outcome=outcome,
                detail=detail[:500],
                channel_id=entry.channel_id,
            )
    except IntegrityError:
        return None


async def schedule_switch(*, due: Due) -> ScheduleRun | None:
    """Make the switch ``due`` (once: None when its row was claimed already) and record how
    it went."""
    entry, event = due.entry, due.event
    run = await database_sync_to_async(_run_record)(
        entry, event, now=timezone.now(), outcome=Outcome.RUNNING
    )
    if run is None:
        return None
    try:
        return await _switch_due(run, due)
    except asyncio.CancelledError:
        await _interrupted_record(run)
        raise
    except Exception as error:
        logger.exception("schedule: %s (%s, due %s) failed", entry, event.action, event.at)
        return await _run_end(run, Outcome.FAILED, _failure_text(error))


def _failure_text(error: Exception) -> str:
    """The error as the admin reads it: its kind and its message (a TimeoutError has none)."""
    message = getattr(error, "message", None) or str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


async def _interrupted_record(run: ScheduleRun) -> None:
    """Record that the server's stop cut the switch ``run`` short, while the runner's task is
    being cancelled: the write is a task of its own, which a cancellation of this one (the
    server asks again) does not stop, awaited for :data:`INTERRUPTED_WRITE_SEC` at most. A
    switch that had ended already keeps its outcome, written again."""
    if run.outcome == Outcome.RUNNING:
        run.outcome, run.detail = Outcome.FAILED, INTERRUPTED_STOPPED
    write = asyncio.ensure_future(run.asave())
    write.add_done_callback(_write_checked)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + INTERRUPTED_WRITE_SEC
    while not write.done() and (left := deadline - loop.time()) > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({write}, timeout=left)
    if not write.done():
        logger.warning("schedule: could not record %s as interrupted in time", run)


def _write_checked(write: asyncio.Future) -> None:
    if not write.cancelled() and write.exception() is not None:
        logger.error("schedule: a switch's row could not be written", exc_info=write.exception())


async def _switch_due(run: ScheduleRun, due: Due) -> ScheduleRun:
    entry, event = due.entry, due.event
    state = await database_sync_to_async(StreamState.load)()
    if due.late and state.switch_started_at is not None and state.switch_started_at > event.at:
        return await _run_end(run, Outcome.SKIPPED, "missed, and a switch was made since")
    if event.action is Action.START:
        return await _start(run, entry, state, late=due.late)
    return await _return(run, entry, state, late=due.late)


async def _start(
    run: ScheduleRun, entry: ScheduleEntry, state: StreamState, *, late: bool
) -> ScheduleRun:
    if state.live and state.channel_id == entry.channel_id:
        run.generation = state.generation  # its end still goes back from this switch
        run.channel_name = state.channel_name
        return await _run_end(run, Outcome.UNCHANGED, f"{state.channel_name} already played")
    run.previous_channel_id = state.channel_id if state.live else ""
    title = f" ({entry.programme_title})" if entry.programme_title else ""
    return await _switch(
        run,
        channel_id=entry.channel_id,
        message=f"Scheduled{title}: switching to {{name}}…",
        late=late,
    )


async def _return(
    run: ScheduleRun, entry: ScheduleEntry, state: StreamState, *, late: bool
) -> ScheduleRun:
    start = await ScheduleRun.objects.filter(
        entry=entry, due_at=run.slot_start, action=Action.START.value
    ).afirst()
    if start is None or not start.generation:
        return await _run_end(run, Outcome.UNCHANGED, "its start made no switch")
    if state.generation != start.generation:
        return await _run_end(run, Outcome.UNCHANGED, "the channel was changed since: it stays")
    if not start.previous_channel_id:
        return await _run_end(run, Outcome.UNCHANGED, "nothing played before it")
    return await _switch(
        run,
        channel_id=start.previous_channel_id,
        message=f"Scheduled: {entry} ended; back to {{name}}…",
        late=late,
    )


async def _switch(run: ScheduleRun, *, channel_id: str, message: str, late: bool) -> ScheduleRun:
    try:
        channel, state = await channel_switch_recorded(channel_id=channel_id, message=message)
    except (ChannelNotFound, UnsupportedStream) as error:
        logger.warning("schedule: %s %s failed: %s", run.entry, run.action, error.message)
        return await _run_end(run, Outcome.FAILED, error.message)
    run.switched_at = state.switch_started_at
    run.generation = state.generation
    run.channel_id, run.channel_name = channel.channel_id, channel.name
    logger.info(
        "schedule: %s (%s, due %s): switched to %s, %.3f s late",
        run.entry,
        run.action,
        run.due_at.isoformat(),
        channel.name,
        run.lateness,
    )
    return await _run_end(run, Outcome.TAKEN_UP if late else Outcome.SWITCHED, "")


async def _run_end(run: ScheduleRun, outcome: str, detail: str) -> ScheduleRun:
    run.outcome, run.detail = outcome, detail[:500]
    await run.asave()
    if outcome in (Outcome.SKIPPED, Outcome.UNCHANGED):
        logger.info("schedule: %s (%s, due %s): %s", run.entry, run.action, run.due_at, detail)
    return run
