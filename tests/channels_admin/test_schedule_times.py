"""When schedule entries switch: weekly entries across the changes of the clocks, one-off
entries, and the ends that go back, as exact UTC datetimes."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from channels_admin.schedule_times import (
    Action,
    EntryRules,
    Event,
    Slot,
    events,
    next_slots,
    weekdays_text,
)

BERLIN = ZoneInfo("Europe/Berlin")
UTC = dt.UTC


def utc(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


def test_a_daily_time_keeps_its_wall_clock_time_across_the_spring_change():
    rules = EntryRules(weekly=True, time_of_day=dt.time(20, 0), weekdays=tuple(range(7)))

    found = next_slots(rules, zone=BERLIN, now=utc(2026, 3, 27, 12), count=3)

    # 20:00 CET (UTC+1), then 20:00 CEST (UTC+2) from Sunday 29 March
    assert found == [
        Slot(utc(2026, 3, 27, 19), None),
        Slot(utc(2026, 3, 28, 19), None),
        Slot(utc(2026, 3, 29, 18), None),
    ]


def test_a_time_the_clocks_skip_plays_when_it_would_have_been():
    rules = EntryRules(weekly=True, time_of_day=dt.time(2, 30), weekdays=(6,))

    found = next_slots(rules, zone=BERLIN, now=utc(2026, 3, 25), count=2)

    # 29 March: 02:30 does not exist (02:00 -> 03:00): 01:30 UTC, 03:30 summer time
    assert found == [Slot(utc(2026, 3, 29, 1, 30), None), Slot(utc(2026, 4, 5, 0, 30), None)]


def test_a_time_that_comes_twice_plays_once_the_first_time():
    rules = EntryRules(weekly=True, time_of_day=dt.time(2, 30), weekdays=(6,))

    found = next_slots(rules, zone=BERLIN, now=utc(2026, 10, 20), count=2)

    # 25 October: 02:30 comes in summer time (00:30 UTC) and again in winter time (01:30 UTC)
    assert found == [Slot(utc(2026, 10, 25, 0, 30), None), Slot(utc(2026, 11, 1, 1, 30), None)]


def test_a_weekly_end_and_return_overnight_and_across_the_autumn_change():
    rules = EntryRules(
        weekly=True,
        time_of_day=dt.time(23, 0),
        until_time=dt.time(6, 0),
        weekdays=(5,),
        then_return=True,
    )

    found = events(rules, zone=BERLIN, after=utc(2026, 10, 20), before=utc(2026, 11, 2))

    # Saturday 23:00 CEST to Sunday 06:00 CET: eight hours that night
    assert found == [
        Event(utc(2026, 10, 24, 21), Action.START, utc(2026, 10, 24, 21), utc(2026, 10, 25, 5)),
        Event(utc(2026, 10, 25, 5), Action.RETURN, utc(2026, 10, 24, 21), utc(2026, 10, 25, 5)),
        Event(utc(2026, 10, 31, 22), Action.START, utc(2026, 10, 31, 22), utc(2026, 11, 1, 5)),
        Event(utc(2026, 11, 1, 5), Action.RETURN, utc(2026, 10, 31, 22), utc(2026, 11, 1, 5)),
    ]


def test_chosen_weekdays_only():
    rules = EntryRules(weekly=True, time_of_day=dt.time(7, 15), weekdays=(0, 2))

    found = next_slots(rules, zone=UTC, now=utc(2026, 11, 27), count=3)  # a Friday

    assert [slot.start for slot in found] == [
        utc(2026, 11, 30, 7, 15),  # Monday
        utc(2026, 12, 2, 7, 15),  # Wednesday
        utc(2026, 12, 7, 7, 15),
    ]


def test_a_one_off_entry_with_an_end_and_return():
    rules = EntryRules(
        weekly=False,
        at=dt.datetime(2026, 11, 27, 20, 15, tzinfo=BERLIN),
        until=dt.datetime(2026, 11, 27, 21, 45, tzinfo=BERLIN),
        then_return=True,
    )
    start, end = utc(2026, 11, 27, 19, 15), utc(2026, 11, 27, 20, 45)

    assert events(rules, zone=BERLIN, after=utc(2026, 11, 27), before=utc(2026, 11, 28)) == [
        Event(start, Action.START, start, end),
        Event(end, Action.RETURN, start, end),
    ]
    # under way: listed until it ends; its return alone is still to come
    assert next_slots(rules, zone=BERLIN, now=utc(2026, 11, 27, 20), count=3) == [Slot(start, end)]
    assert events(rules, zone=BERLIN, after=utc(2026, 11, 27, 20), before=utc(2026, 11, 28)) == [
        Event(end, Action.RETURN, start, end)
    ]
    assert next_slots(rules, zone=BERLIN, now=end, count=3) == []


def test_an_end_without_return_makes_no_switch():
    rules = EntryRules(weekly=False, at=utc(2026, 11, 27, 20), until=utc(2026, 11, 27, 21))

    found = events(rules, zone=UTC, after=utc(2026, 11, 27), before=utc(2026, 11, 28))

    assert found == [
        Event(utc(2026, 11, 27, 20), Action.START, utc(2026, 11, 27, 20), utc(2026, 11, 27, 21))
    ]


def test_events_in_a_window_are_those_after_its_start_up_to_its_end():
    rules = EntryRules(weekly=True, time_of_day=dt.time(12, 0), weekdays=tuple(range(7)))

    found = events(rules, zone=UTC, after=utc(2026, 11, 27, 12), before=utc(2026, 11, 29, 12))

    assert [event.at for event in found] == [utc(2026, 11, 28, 12), utc(2026, 11, 29, 12)]


def test_weekdays_in_words():
    assert weekdays_text([0, 1, 2, 3, 4]) == "Mon-Fri"
    assert weekdays_text([5, 6]) == "Sat, Sun"
    assert weekdays_text([6, 0, 2, 3, 4]) == "Mon, Wed-Fri, Sun"
    assert weekdays_text(range(7)) == "every day"
