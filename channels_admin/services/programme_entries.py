"""A programme of the guide made a schedule entry: "when programme P starts on X, play X until it
ends, then go back".

P is named by its playlist channel and its start, not by its ``Programme`` row: each refresh of
the guide writes every row anew under a new version, so a row ID read before a refresh names
nothing after it, whereas the same programme at the same time on the same channel is found
again in the new guide. The entry is a one-off entry like any other (``services/schedule.py``
and its form judge it, and the schedule's bound holds): from the programme's start to its stop,
then back. It keeps the times it was made with: a later guide that moves the programme does not
move the entry (the admin page shows both, and the entry can be edited or made again).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from channels.db import database_sync_to_async
from django.utils import timezone

from channels_admin import selectors
from channels_admin.errors import ChannelNotFound, ProgrammeNotFound, ProgrammeNotSchedulable
from channels_admin.models import ScheduleEntry
from channels_admin.services.schedule import schedule_entry_create

NAME_MAX = 200  # ScheduleEntry.name's length


@dataclass(frozen=True)
class _Found:
    programme: selectors.GuideProgramme
    scheduled: bool


async def programme_entry_create(
    *, channel_id: str, start: datetime, guide_version: int | None = None
) -> ScheduleEntry:
    """A one-off entry playing ``channel_id`` from the start of its guide programme that starts
    at ``start`` to its stop, then going back. ``guide_version`` is the guide the programme was
    picked from, if known: a programme gone since is then said to be so. ChannelNotFound,
    ProgrammeNotFound, ProgrammeNotSchedulable (started, ended, scheduled already), and the
    schedule's own refusals (ScheduleFull)."""
    found = await database_sync_to_async(_programme_find)(
        channel_id=channel_id, start=start, guide_version=guide_version
    )
    programme, now = found.programme, timezone.now()
    if programme.stop <= now:
        raise ProgrammeNotSchedulable("the programme has ended")
    if programme.start <= now:
        raise ProgrammeNotSchedulable(
            "the programme has started: switch to the channel now instead"
        )
    if found.scheduled:
        raise ProgrammeNotSchedulable("the programme is in the schedule already")
    return await schedule_entry_create(
        values={
            "name": programme.title[:NAME_MAX],
            "channel_id": channel_id,
            "kind": ScheduleEntry.Kind.ONCE,
            "at": programme.start,
            "until": programme.stop,
            "then_return": True,
            "programme_title": programme.title,
        }
    )


def _programme_find(*, channel_id: str, start: datetime, guide_version: int | None) -> _Found:
    channel = selectors.playlist_channel(channel_id=channel_id)
    if channel is None:
        raise ChannelNotFound(channel_id)
    programme = selectors.guide_programme_at(channel=channel, start=start)
    if programme is None:
        refreshed = guide_version is not None and guide_version != selectors.guide_version()
        raise ProgrammeNotFound(
            "the guide was refreshed since and has no programme on this channel at that time"
            if refreshed
            else "the guide has no programme on this channel at that time"
        )
    scheduled = ScheduleEntry.objects.filter(
        kind=ScheduleEntry.Kind.ONCE,
        channel_id=channel_id,
        at=programme.start,
        until=programme.stop,
        programme_title=programme.title,
    ).exists()
    return _Found(programme, scheduled)
