"""Reads of the channel admin: channel search, groups, a channel's sources, the stream
status, and the schedule (its entries, their next switches, the switches it made), from the
database alone (what this process's hub knows is the services' to ask:
``services/viewers.py``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import models
from django.db.models import Count, F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from channels_admin.models import (
    BackupSource,
    Channel,
    GuideChannel,
    GuideChannelName,
    GuideState,
    Playlist,
    Programme,
    ScheduleEntry,
    ScheduleRun,
    StillChannel,
    StreamState,
    ViewerLink,
    url_relayable,
)
from channels_admin.schedule_times import Action, Slot, next_slots, weekdays_text
from channels_admin.streaming.sources import Upstream

# Channels of a list or search answer that carry the guide's now and next: the first this many
# (the admin page draws as many; a search narrows a 100,000-channel list to them).
GUIDE_LISTED_MAX = 500


def channels_search(*, search: str = "", group: str = "") -> list[dict[str, Any]]:
    """Channels in playlist order; ``search`` matches a casefolded substring of the name or
    ID, ``group`` the whole group name ignoring case; empty means no filter. The first
    :data:`GUIDE_LISTED_MAX` carry the guide's ``now`` and ``next`` (null past them, or without
    a programme)."""
    channels = Channel.objects.of_default_playlist()
    # A newline joins name and ID in search_text, so a needle with one would match across.
    needle = search.replace("\n", "").casefold()
    if needle:
        channels = channels.filter(search_text__contains=needle)
    if group:
        channels = channels.filter(search_group=group.casefold())
    rows = channels.order_by("position").values_list(
        "channel_id", "name", "stream_url", "group", "logo", "tvg_id", "tvg_name"
    )
    listed = [
        {"id": id_, "name": name, "stream_url": url, "group": group_, "logo": logo}
        for id_, name, url, group_, logo, _, _ in rows
    ]
    guided = [
        GuideKeys(id_, tvg_id, tvg_name, name)
        for id_, name, _, _, _, tvg_id, tvg_name in rows[:GUIDE_LISTED_MAX]
    ]
    guide = guide_now_next(channels=guided)
    for channel in listed:
        shown = guide.get(channel["id"])
        channel["now"] = shown["now"] if shown else None
        channel["next"] = shown["next"] if shown else None
    return listed


def groups_list() -> list[dict[str, Any]]:
    """Non-empty groups with their channel counts, sorted by name."""
    rows = (
        Channel.objects.of_default_playlist()
        .exclude(group="")
        .values("group")
        .annotate(channels=Count("id"))
    )
    return sorted(
        ({"name": row["group"], "channels": row["channels"]} for row in rows),
        key=lambda row: (row["name"].casefold(), row["name"]),
    )


@dataclass(frozen=True)
class SourceRow:
    """One of a channel's sources, with where it comes from (for the admin's list)."""

    origin: Literal["primary", "playlist", "by hand"]
    upstream: Upstream
    backup: BackupSource | None = None  # the row of a backup added by hand


def channel_sources(*, channel: Channel) -> list[Upstream]:
    """The streams that play ``channel``, in the order to try them (see
    :func:`channel_source_rows`)."""
    return [row.upstream for row in channel_source_rows(channel=channel)]


def channel_still(*, channel: Channel) -> bool:
    """Whether ``channel``'s picture is legitimately still: the hub leaves it unjudged."""
    return StillChannel.objects.filter(
        playlist_id=channel.playlist_id, channel_key=channel.source_key
    ).exists()


def channel_source_rows(*, channel: Channel) -> list[SourceRow]:
    """``channel``'s own stream first; then the playlist's other entries with its ``tvg-id``,
    in playlist order; then the backups added by hand under its key, in their order. A URL
    comes once (its first place), and a backup the hub cannot relay (not http or https) is left
    out. Two queries at most: the entries with the ``tvg-id``, the backups."""
    rows = [SourceRow("primary", Upstream(channel.stream_url, channel.upstream_headers))]
    seen = {channel.stream_url}
    if channel.tvg_id:
        siblings = (
            Channel.objects.filter(playlist_id=channel.playlist_id, tvg_id=channel.tvg_id)
            .exclude(pk=channel.pk)
            .order_by("position")
            .only("stream_url", "http_headers", "user_agent", "referrer")
        )
        for sibling in siblings:
            if sibling.stream_url not in seen and url_relayable(sibling.stream_url):
                seen.add(sibling.stream_url)
                upstream = Upstream(sibling.stream_url, sibling.upstream_headers)
                rows.append(SourceRow("playlist", upstream))
    backups = BackupSource.objects.filter(
        playlist_id=channel.playlist_id, channel_key=channel.source_key
    ).order_by("position", "id")
    for backup in backups:
        if backup.url not in seen and url_relayable(backup.url):
            seen.add(backup.url)
            rows.append(SourceRow("by hand", Upstream(backup.url, dict(backup.headers)), backup))
    return rows


def backup_key_listed(*, playlist_id: int, channel_key: str) -> bool:
    """Whether an entry of the playlist has ``channel_key`` (its tvg-id or, without one, its
    channel ID): a backup under a key no entry has is orphaned."""
    channels = Channel.objects.filter(playlist_id=playlist_id)
    return (
        channels.filter(tvg_id=channel_key).exists()
        or channels.filter(tvg_id="", channel_id=channel_key).exists()
    )


def stream_status() -> dict[str, Any]:
    """The stream's status for the admin, the stream URL included."""
    state = StreamState.load()
    return {
        "channel_name": state.channel_name,
        "live": state.live,
        "transitioning": state.transitioning,
        "upstream_down": state.upstream_down,
        "upstream_detail": state.upstream_detail,
        "upstream_info": state.upstream_info,
        "playlist_version": _playlist_version(),
        "switch_started_at": (
            state.switch_started_at.isoformat() if state.switch_started_at else None
        ),
        "current_stream_url": state.current_stream_url,
        **_sources_status(state),
        "failovers": state.failovers,
        "last_failure": (
            {
                "source": state.last_failure_source,
                "reason": state.last_failure,
                "at": state.last_failure_at.isoformat(),
            }
            if state.last_failure_at
            else None
        ),
        "switch_message": state.switch_message,
        "switch_returned": state.switch_returned,
        "guide": guide_state(),
        "private": state.private,
    }


def _sources_status(state: StreamState) -> dict[str, Any]:
    """Which source plays (``primary``, ``backup 2 of 3``; "" while none does), of how many,
    whether the hub is looking for one (the slate plays meanwhile), and the changes of the
    viewers' stream (a player starts afresh at each)."""
    return {
        "source": state.source_label,
        "sources": len(state.source_list),
        "reconnecting": state.live and state.upstream_down,
        "stream_serial": state.stream_serial,
        "stream_format": state.stream_format,
    }


def viewer_status() -> dict[str, Any]:
    """What the public viewer page may know: no stream URL (it may carry credentials). The
    switch's sentence names channels and why one failed (``failure_reasons.py``), no URL."""
    state = StreamState.load()
    channel = (
        Channel.objects.of_default_playlist()
        .filter(channel_id=state.channel_id)
        .only("channel_id", "logo", "group", "chno", "tvg_id", "tvg_name", "name")
        .first()
        if state.channel_id
        else None
    )
    guide = guide_now_next(channels=[channel]).get(channel.channel_id) if channel else None
    return {
        "channel_name": state.channel_name,
        # the playlist's tvg-logo, else the guide's icon
        "channel_logo": (channel.logo or (guide["icon"] if guide else "")) if channel else "",
        "channel_group": channel.group if channel else "",
        "channel_number": channel.chno if channel else "",
        "live": state.live,
        "transitioning": state.transitioning,
        "upstream_down": state.upstream_down,
        "upstream_info": state.upstream_info,
        "playlist_version": _playlist_version(),
        **_sources_status(state),
        "switch_message": state.switch_message,
        "switch_returned": state.switch_returned,
        "now": guide["now"] if guide else None,
        "next": guide["next"] if guide else None,
    }


def _playlist_version() -> int:
    version = (
        Playlist.objects.filter(name=Playlist.DEFAULT_NAME)
        .values_list("version", flat=True)
        .first()
    )
    return version or 0


class GuideMatched(Protocol):
    """What matches a channel to the guide: a :class:`Channel`, or :class:`GuideKeys`."""

    channel_id: str
    tvg_id: str
    tvg_name: str
    name: str


@dataclass(frozen=True)
class GuideKeys:
    channel_id: str
    tvg_id: str
    tvg_name: str
    name: str


def guide_now_next(
    *, channels: Sequence[GuideMatched], at: datetime | None = None
) -> dict[str, dict[str, Any]]:
    """For each of ``channels`` the guide knows (by channel ID): ``{"icon", "now", "next"}``,
    where ``now`` is the programme on at ``at`` (default: now) with its ``progress`` (0 to 1),
    and ``next`` the one after; either null where the guide has none. A channel is the guide's
    channel of its ``tvg-id``, else the one with its ``tvg-name``, else its title, as a display
    name (ignoring case). Five queries, whatever the number of channels (up to SQLite's
    parameter limit: the callers pass at most :data:`GUIDE_LISTED_MAX`)."""
    version = (
        GuideState.objects.filter(pk=GuideState.SINGLETON_PK)
        .values_list("version", flat=True)
        .first()
    )
    if not version or not channels:
        return {}
    at = at or timezone.now()
    guide_ids = _guide_ids(channels, version)
    if not guide_ids:
        return {}
    wanted = set(guide_ids.values())
    icons = dict(
        GuideChannel.objects.filter(version=version, xmltv_id__in=wanted).values_list(
            "xmltv_id", "icon"
        )
    )
    upcoming = (
        Programme.objects.filter(version=version, channel__in=wanted, stop__gt=at)
        .annotate(rank=Window(RowNumber(), partition_by=[F("channel")], order_by=F("stop").asc()))
        .filter(rank__lte=2)
        .values_list("channel", "start", "stop", "title", "subtitle")
        .order_by("channel", "stop")
    )
    programmes: dict[str, list[tuple]] = {}
    for channel, *programme in upcoming:
        programmes.setdefault(channel, []).append(programme)
    answer = {}
    for channel_id, guide_id in guide_ids.items():
        first, *rest = programmes.get(guide_id) or [None]
        on_now = first is not None and first[0] <= at
        answer[channel_id] = {
            "icon": icons.get(guide_id, ""),
            "now": _programme_shown(first, at) if on_now else None,
            "next": _programme_shown((rest[0] if rest else None) if on_now else first, None),
        }
    return answer


def _guide_ids(channels: Iterable[GuideMatched], version: int) -> dict[str, str]:
    """Channel ID -> the guide's channel ID, for the channels the guide knows."""
    channels = list(channels)
    tvg_ids = {channel.tvg_id for channel in channels if channel.tvg_id}
    known = set(
        GuideChannel.objects.filter(version=version, xmltv_id__in=tvg_ids).values_list(
            "xmltv_id", flat=True
        )
    )
    matched = {c.channel_id: c.tvg_id for c in channels if c.tvg_id in known}
    keys = {
        name.casefold()
        for channel in channels
        if channel.channel_id not in matched
        for name in (channel.tvg_name, channel.name)
        if name
    }
    by_name: dict[str, str] = {}
    names = GuideChannelName.objects.filter(version=version, key__in=keys).order_by("id")
    for key, xmltv_id in names.values_list("key", "xmltv_id"):
        by_name.setdefault(key, xmltv_id)
    for channel in channels:
        if channel.channel_id in matched:
            continue
        for name in (channel.tvg_name, channel.name):
            if name and name.casefold() in by_name:
                matched[channel.channel_id] = by_name[name.casefold()]
                break
    return matched


def _programme_shown(programme: tuple | None, at: datetime | None) -> dict[str, Any] | None:
    """A programme as the API gives it; with ``at``, how far through it that is."""
    if programme is None:
        return None
    start, stop, title, subtitle = programme
    shown = {
        "title": title,
        "subtitle": subtitle,
        "start": start.isoformat(),
        "stop": stop.isoformat(),
    }
    if at is not None:
        shown["progress"] = round((at - start) / (stop - start), 3)
    return shown


# A channel's upcoming programmes listed at most (a week of a busy channel's guide is ~300).
PROGRAMMES_LISTED = 50


@dataclass(frozen=True)
class GuideProgramme:
    """A programme of the shown guide, on a playlist channel."""

    guide_channel: str
    start: datetime
    stop: datetime
    title: str
    subtitle: str


def guide_version() -> int:
    """The version of the guide shown; 0 before any refresh."""
    version = (
        GuideState.objects.filter(pk=GuideState.SINGLETON_PK)
        .values_list("version", flat=True)
        .first()
    )
    return version or 0


def guide_programmes(
    *, channel: GuideMatched, now: datetime, limit: int = PROGRAMMES_LISTED
) -> dict[str, Any]:
    """The programmes of ``channel`` (matched to the guide as :func:`guide_now_next` does) that
    have not ended at ``now``, in order, at most ``limit``: ``{"channel_id", "guide_version",
    "guide_channel" (null where the guide has none), "programmes": [{start, stop, title,
    subtitle, on_now}]}``. A programme is named by its channel and ``start`` (what
    :func:`guide_programme_at` finds), not its row, which each refresh replaces."""
    version = guide_version()
    guide_id = _guide_ids([channel], version).get(channel.channel_id) if version else None
    rows = (
        Programme.objects.filter(version=version, channel=guide_id, stop__gt=now)
        .order_by("start", "stop")
        .values_list("start", "stop", "title", "subtitle")[:limit]
        if guide_id
        else []
    )
    return {
        "channel_id": channel.channel_id,
        "guide_version": version,
        "guide_channel": guide_id,
        "programmes": [
            {
                "start": _iso(start),
                "stop": _iso(stop),
                "title": title,
                "subtitle": subtitle,
                "on_now": start <= now,
            }
            for start, stop, title, subtitle in rows
        ],
    }


def guide_programme_at(*, channel: GuideMatched, start: datetime) -> GuideProgramme | None:
    """The programme of the shown guide that starts at ``start`` on ``channel``'s guide channel;
    None where the guide has none (the guide refreshed since may have moved it)."""
    version = guide_version()
    guide_id = _guide_ids([channel], version).get(channel.channel_id) if version else None
    if guide_id is None:
        return None
    row = (
        Programme.objects.filter(version=version, channel=guide_id, start=start)
        .order_by("stop", "id")
        .values_list("start", "stop", "title", "subtitle")
        .first()
    )
    return GuideProgramme(guide_id, *row) if row else None


def guide_state() -> dict[str, Any]:
    """How the guide is: when it was last refreshed, what it holds, and why the last refresh
    failed (the guide shown is then the last good one)."""
    state = GuideState.load()
    return {
        "version": state.version,
        "refreshed_at": _iso(state.refreshed_at),
        "attempted_at": _iso(state.attempted_at),
        "channels": state.channels,
        "programmes": state.programmes,
        "left_out": state.left_out,
        "sources": state.sources,
        "last_error": state.last_error,
        "last_error_at": _iso(state.last_error_at),
    }


def viewer_links_rows(*, revoked_since: datetime) -> list[dict[str, Any]]:
    """The viewer links, newest first: those not revoked, and those revoked since
    ``revoked_since`` (their viewers may still be leaving)."""
    links = ViewerLink.objects.filter(
        models.Q(revoked_at__isnull=True) | models.Q(revoked_at__gte=revoked_since)
    )
    now = timezone.now()
    return [
        {
            "id": link.pk,
            "name": link.name,
            "created_at": link.created_at.isoformat(),
            "expires_at": link.expires_at.isoformat() if link.expires_at else None,
            "max_viewers": link.max_viewers,
            "revoked_at": link.revoked_at.isoformat() if link.revoked_at else None,
            "active": link.admits_at(now),
        }
        for link in links
    ]


def stream_private() -> bool:
    return StreamState.objects.filter(pk=StreamState.SINGLETON_PK, private=True).exists()


def playlist_channel(*, channel_id: str) -> Channel | None:
    """The playlist's channel ``channel_id``, with what matches it to the guide."""
    return (
        Channel.objects.of_default_playlist()
        .filter(channel_id=channel_id)
        .only("channel_id", "name", "tvg_id", "tvg_name")
        .first()
    )


def channel_name(*, channel_id: str) -> str:
    """The name of the playlist's channel ``channel_id``; "" when it has none."""
    return (
        Channel.objects.of_default_playlist()
        .filter(channel_id=channel_id)
        .values_list("name", flat=True)
        .first()
        or ""
    )


def schedule_zone() -> ZoneInfo:
    """The time zone of the schedule's weekly times and of one-off times given without one."""
    return ZoneInfo(settings.CHANNELS_SCHEDULE_TZ)


UPCOMING = 10  # the next switches listed
RUNS_LISTED = 20  # the latest switches of the schedule listed
NEXT_SLOTS = 3  # each entry's next slots


def schedule_overview(*, now: dt.datetime) -> dict[str, Any]:
    """The schedule for the admin page: its time zone, its entries (each with its next slots),
    the next switches of all of them in order, and the latest switches it made or skipped."""
    zone = schedule_zone()
    entries = list(ScheduleEntry.objects.order_by("id"))
    names = dict(
        Channel.objects.of_default_playlist()
        .filter(channel_id__in={entry.channel_id for entry in entries})
        .values_list("channel_id", "name")
    )
    upcoming = []
    listed = []
    for entry in entries:
        found = next_slots(entry.rules, zone=zone, now=now, count=NEXT_SLOTS)
        listed.append(schedule_entry_json(entry, channel_name=names.get(entry.channel_id, "")))
        listed[-1]["next"] = [_slot_json(slot) for slot in found]
        if not entry.enabled:
            continue
        for slot in next_slots(entry.rules, zone=zone, now=now, count=UPCOMING):
            if slot.start > now:
                upcoming.append((slot.start, Action.START, entry))
            if entry.then_return and slot.end is not None:
                upcoming.append((slot.end, Action.RETURN, entry))
    upcoming.sort(key=lambda item: (item[0], item[1] is Action.START, item[2].pk))
    runs = ScheduleRun.objects.select_related("entry").order_by("-due_at", "-id")[:RUNS_LISTED]
    return {
        "time_zone": settings.CHANNELS_SCHEDULE_TZ,
        "now": now.isoformat(),
        "entries": listed,
        "upcoming": [
            {
                "at": at.isoformat(),
                "action": action.value,
                "entry_id": entry.pk,
                "name": str(entry),
                "channel_id": entry.channel_id,
                "channel_name": names.get(entry.channel_id, ""),
            }
            for at, action, entry in upcoming[:UPCOMING]
        ],
        "runs": [_run_json(run) for run in runs],
    }


def schedule_entry_json(entry: ScheduleEntry, *, channel_name: str) -> dict[str, Any]:
    """An entry as the API gives it (the times in ISO 8601: one-off ones in UTC, weekly ones
    as wall-clock times of the schedule's zone)."""
    return {
        "id": entry.pk,
        "name": entry.name,
        "channel_id": entry.channel_id,
        "channel_name": channel_name,
        "enabled": entry.enabled,
        "kind": entry.kind,
        "at": _iso(entry.at),
        "until": _iso(entry.until),
        "time_of_day": _iso(entry.time_of_day),
        "until_time": _iso(entry.until_time),
        "weekdays": entry.weekdays,
        "days": weekdays_text(entry.weekdays) if entry.kind == ScheduleEntry.Kind.WEEKLY else "",
        "then_return": entry.then_return,
        "programme_title": entry.programme_title,
        "missed": entry.missed,
    }


def _iso(value: dt.datetime | dt.time | None) -> str | None:
    """``value`` in ISO 8601; an instant in UTC."""
    if isinstance(value, dt.datetime):
        value = value.astimezone(dt.UTC)
    return value.isoformat() if value is not None else None


def _slot_json(slot: Slot) -> dict[str, str | None]:
    return {"start": slot.start.isoformat(), "end": _iso(slot.end)}


def _run_json(run: ScheduleRun) -> dict[str, Any]:
    return {
        "entry_id": run.entry_id,
        "name": str(run.entry),
        "action": run.action,
        "due_at": run.due_at.isoformat(),
        "switched_at": _iso(run.switched_at),
        "lateness": run.lateness,
        "outcome": run.outcome,
        "detail": run.detail,
        "channel_name": run.channel_name,
    }
