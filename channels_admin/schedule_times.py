"""When a schedule entry switches: its slots (a start, and an end where it has one) and the
events they make, in UTC, from the entry's rules and the schedule's time zone.

Pure computation (no Django, no database), so that the runner and the admin page's list of
the next entries agree, and the rules of daylight saving time are tested with exact datetimes.

A weekly entry's time of day is wall-clock time in the schedule's zone, so that "20:00" stays
20:00 across a change of the clocks. Two days a year that time is odd:

- a time the clocks skip (02:30 when they jump from 02:00 to 03:00) plays at the moment it
  would have been without the jump (03:30 summer time): PEP 495's reading of such a time;
- a time that comes twice (02:30 when they fall back from 03:00 to 02:00) plays once, the
  first time (summer time).

A weekly entry's end (``until_time``) is on the day it starts if that time comes later in the
day, else on the next day; its slots thus last less than a day.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from zoneinfo import ZoneInfo

UTC = dt.UTC
ONE_DAY = dt.timedelta(days=1)
FAR_FUTURE = dt.datetime.max.replace(tzinfo=UTC)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # datetime.weekday()'s order


class Action(enum.StrEnum):
    START = "start"  # switch to the entry's channel
    RETURN = "return"  # the slot ended: back to what played before it


@dataclass(frozen=True)
class EntryRules:
    """What an entry says of its times: ``at``/``until`` (aware) for a one-off entry;
    ``time_of_day``/``until_time`` (wall-clock, in the schedule's zone) and ``weekdays``
    (0 = Monday) for a weekly one. ``then_return``: at the end, go back."""

    weekly: bool
    at: dt.datetime | None = None
    until: dt.datetime | None = None
    time_of_day: dt.time | None = None
    until_time: dt.time | None = None
    weekdays: tuple[int, ...] = ()
    then_return: bool = False


@dataclass(frozen=True)
class Slot:
    """One occurrence of an entry: from ``start`` to ``end`` (None: no end), both in UTC."""

    start: dt.datetime
    end: dt.datetime | None


@dataclass(frozen=True)
class Event:
    """A switch the schedule makes: ``action`` at ``at`` (UTC), for the slot from
    ``slot_start`` to ``slot_end`` (a return names the start it goes back from)."""

    at: dt.datetime
    action: Action
    slot_start: dt.datetime
    slot_end: dt.datetime | None = None


def local_instant(day: dt.date, time: dt.time, zone: ZoneInfo) -> dt.datetime:
    """``time`` on ``day`` in ``zone``, as a UTC instant (skipped and repeated times: above)."""
    return dt.datetime.combine(day, time.replace(tzinfo=None, fold=0), tzinfo=zone).astimezone(UTC)


def slots(
    rules: EntryRules, *, zone: ZoneInfo, after: dt.datetime, before: dt.datetime
) -> list[Slot]:
    """The entry's slots that start in ``(after, before]``, in order."""
    if not rules.weekly:
        if rules.at is None or not after < rules.at <= before:
            return []
        end = rules.until.astimezone(UTC) if rules.until is not None else None
        return [Slot(rules.at.astimezone(UTC), end)]
    return [slot for slot in _weekly_slots(rules, zone, after, before) if after < slot.start]


def _weekly_slots(
    rules: EntryRules, zone: ZoneInfo, after: dt.datetime, before: dt.datetime
) -> Iterator[Slot]:
    if rules.time_of_day is None or not rules.weekdays:
        return
    # A day either side: the local date of an instant differs from its UTC date by up to one.
    day = after.astimezone(zone).date() - ONE_DAY
    last = before.astimezone(zone).date() + ONE_DAY
    while day <= last:
        if day.weekday() in rules.weekdays:
            start = local_instant(day, rules.time_of_day, zone)
            if start > before:
                return
            yield Slot(start, _weekly_end(rules, day, zone))
        day += ONE_DAY


def _weekly_end(rules: EntryRules, day: dt.date, zone: ZoneInfo) -> dt.datetime | None:
    if rules.until_time is None:
        return None
    end_day = day if rules.until_time > rules.time_of_day else day + ONE_DAY
    return local_instant(end_day, rules.until_time, zone)


def events(
    rules: EntryRules, *, zone: ZoneInfo, after: dt.datetime, before: dt.datetime
) -> list[Event]:
    """The switches the entry makes in ``(after, before]``, in order: each slot's start, and
    its end where the entry goes back then. A slot that started before ``after`` and ends
    within gives its return only."""
    found = []
    for slot in _slots_under_way(rules, zone=zone, after=after, before=before):
        if after < slot.start:
            found.append(Event(slot.start, Action.START, slot.start, slot.end))
        if rules.then_return and slot.end is not None and after < slot.end <= before:
            found.append(Event(slot.end, Action.RETURN, slot.start, slot.end))
    return sorted(found, key=lambda event: event.at)


def next_slots(rules: EntryRules, *, zone: ZoneInfo, now: dt.datetime, count: int) -> list[Slot]:
    """The entry's next ``count`` slots that start after ``now``, or are under way then."""
    # A weekly entry has a slot a week at least: count + 1 weeks hold the ``count`` asked for.
    before = now + dt.timedelta(weeks=count + 1) if rules.weekly else FAR_FUTURE
    return [
        slot
        for slot in _slots_under_way(rules, zone=zone, after=now, before=before)
        if slot.start > now or (slot.end is not None and slot.end > now)
    ][:count]


def _slots_under_way(
    rules: EntryRules, *, zone: ZoneInfo, after: dt.datetime, before: dt.datetime
) -> list[Slot]:
    """The slots that start in ``(after, before]``, and those that started by ``after`` and
    may still be under way then (a weekly slot lasts less than a day; a one-off one names its
    end)."""
    if not rules.weekly:
        at = rules.at
        if at is None or at > before:
            return []
        return [Slot(at.astimezone(UTC), rules.until.astimezone(UTC) if rules.until else None)]
    return slots(rules, zone=zone, after=after - ONE_DAY, before=before)


def weekdays_text(weekdays: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 4]`` as ``Mon-Fri``; single days and shorter runs listed."""
    days = sorted(set(weekdays))
    if len(days) == 7:
        return "every day"
    runs: list[list[int]] = []
    for day in days:
        if runs and day == runs[-1][-1] + 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    return ", ".join(
        f"{WEEKDAYS[run[0]]}-{WEEKDAYS[run[-1]]}"
        if len(run) > 2
        else ", ".join(WEEKDAYS[day] for day in run)
        for run in runs
    )
