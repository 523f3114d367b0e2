"""Reads of the channel admin: channel search, groups, a channel's sources, and the stream
status, from the database alone (what this process's hub knows is the services' to ask:
``services/viewers.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import Count

from channels_admin.models import BackupSource, Channel, Playlist, StreamState, url_relayable
from channels_admin.streaming.sources import Upstream


def channels_search(*, search: str = "", group: str = "") -> list[dict[str, str]]:
    """Channels in playlist order; ``search`` matches a casefolded substring of the name or
    ID, ``group`` the whole group name ignoring case; empty means no filter."""
    channels = Channel.objects.of_default_playlist()
    # A newline joins name and ID in search_text, so a needle with one would match across.
    needle = search.replace("\n", "").casefold()
    if needle:
        channels = channels.filter(search_text__contains=needle)
    if group:
        channels = channels.filter(search_group=group.casefold())
    rows = channels.order_by("position").values_list(
        "channel_id", "name", "stream_url", "group", "logo"
    )
    return [
        {"id": id_, "name": name, "stream_url": url, "group": group_, "logo": logo}
        for id_, name, url, group_, logo in rows
    ]


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
        .only("logo", "group", "chno")
        .first()
        if state.channel_id
        else None
    )
    return {
        "channel_name": state.channel_name,
        "channel_logo": channel.logo if channel else "",
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
    }


def _playlist_version() -> int:
    version = (
        Playlist.objects.filter(name=Playlist.DEFAULT_NAME)
        .values_list("version", flat=True)
        .first()
    )
    return version or 0
