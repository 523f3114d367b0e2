"""The schedule's entries: created, changed and deleted (the admin API, the Django admin), with
the runner told at once (``services/schedule_runner.py``), in whichever process it runs.

An entry's values come as a form's data (:class:`ScheduleEntryForm`): what the API's JSON
gives, over the entry's values as they are (an update names only what changes), over the
model's defaults (a creation).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from channels_admin.errors import ScheduleEntryNotFound, ScheduleFull, ScheduleInvalid
from channels_admin.models import ScheduleEntry
from channels_admin.schedule_form import FIELDS, ScheduleEntryForm
from channels_admin.selectors import schedule_zone
from channels_admin.services.announcements import group_announce

# Channel-layer group of the schedule runners (one runs; every process listens).
SCHEDULE_GROUP = "schedule-changed"
_TEXT_FIELDS = {"name", "channel_id", "kind", "missed", "programme_title"}
_BOOLEAN_FIELDS = {"enabled", "then_return"}
_TIME_FIELDS = {"at", "until", "time_of_day", "until_time"}


async def schedule_entry_create(*, values: dict[str, Any]) -> ScheduleEntry:
    """A new entry of ``values``; ScheduleInvalid, or ScheduleFull past
    ``CHANNELS_SCHEDULE_MAX_ENTRIES``."""
    entry = await database_sync_to_async(_entry_create)(values=values)
    await schedule_wake()
    return entry


async def schedule_entry_update(*, entry_id: int, values: dict[str, Any]) -> ScheduleEntry:
    """The entry with ``values`` changed, the others kept; ScheduleEntryNotFound,
    ScheduleInvalid (nothing changed)."""
    entry = await database_sync_to_async(_entry_update)(entry_id=entry_id, values=values)
    await schedule_wake()
    return entry


async def schedule_entry_delete(*, entry_id: int) -> None:
    """Delete the entry and the record of its switches; ScheduleEntryNotFound."""
    deleted, _ = await ScheduleEntry.objects.filter(pk=entry_id).adelete()
    if not deleted:
        raise ScheduleEntryNotFound(str(entry_id))
    await schedule_wake()


async def schedule_wake() -> None:
    """Tell the runner the entries changed, so that it looks again now rather than at its next
    look (a few seconds), which it does all the same if the news is lost."""
    await group_announce(SCHEDULE_GROUP, {"type": "schedule.changed"})


def schedule_wake_sync() -> None:
    """:func:`schedule_wake`, from synchronous code (the Django admin)."""
    async_to_sync(schedule_wake)()


def schedule_entry_saved(*, entry: ScheduleEntry) -> None:
    """Stamp an entry saved by a form elsewhere (the Django admin): its occurrences count from
    now on."""
    entry.edited_at = timezone.now()


@transaction.atomic
def _entry_create(*, values: dict[str, Any]) -> ScheduleEntry:
    if ScheduleEntry.objects.count() >= settings.CHANNELS_SCHEDULE_MAX_ENTRIES:
        raise ScheduleFull(
            f"the schedule is full: {settings.CHANNELS_SCHEDULE_MAX_ENTRIES} entries at most"
        )
    return _entry_save(ScheduleEntry(), values)


@transaction.atomic
def _entry_update(*, entry_id: int, values: dict[str, Any]) -> ScheduleEntry:
    entry = ScheduleEntry.objects.select_for_update().filter(pk=entry_id).first()
    if entry is None:
        raise ScheduleEntryNotFound(str(entry_id))
    return _entry_save(entry, values)


def _entry_save(entry: ScheduleEntry, values: dict[str, Any]) -> ScheduleEntry:
    _values_check(values)
    data = {name: getattr(entry, name) for name in FIELDS}
    data.update(values)
    # A time without an offset is the schedule's own (the weekly times are too).
    with timezone.override(schedule_zone()):
        form = ScheduleEntryForm(data=data, instance=entry)
        if not form.is_valid():
            raise ScheduleInvalid(form.error_text())
    entry = form.save(commit=False)
    entry.edited_at = timezone.now()
    entry.save()
    return entry


def _values_check(values: dict[str, Any]) -> None:
    """What a form would take too kindly: a number for a name, ``"no"`` for false."""
    for name, value in values.items():
        if name not in FIELDS:
            raise ScheduleInvalid(f"unknown field: {name[:50]}")
        if name in _TEXT_FIELDS and not isinstance(value, str):
            raise ScheduleInvalid(f"{name}: must be text")
        if name in _BOOLEAN_FIELDS and not isinstance(value, bool):
            raise ScheduleInvalid(f"{name}: must be true or false")
        if name in _TIME_FIELDS and not (value is None or isinstance(value, str | dt.datetime)):
            raise ScheduleInvalid(f"{name}: must be a time as text, or null")
        if name == "weekdays" and not isinstance(value, list):
            raise ScheduleInvalid("weekdays: must be a list of day numbers, 0 (Monday) to 6")
