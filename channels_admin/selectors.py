"""Reads of the channel admin: channel search, groups, and the stream status."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from channels_admin.models import Channel, Playlist, StreamState


def channels_search(*, search: str = "", group: str = "") -> list[dict[str, str]]:
    """Channels in playlist order; ``search`` matches a casefolded substring of the name or
    ID, ``group`` the whole group name ignoring case; empty means no filter."""
    channels = Channel.objects.filter(playlist__name=Playlist.DEFAULT_NAME)
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
        Channel.objects.filter(playlist__name=Playlist.DEFAULT_NAME)
        .exclude(group="")
        .values("group")
        .annotate(channels=Count("id"))
    )
    return sorted(
        ({"name": row["group"], "channels": row["channels"]} for row in rows),
        key=lambda row: (row["name"].casefold(), row["name"]),
    )


def stream_status() -> dict[str, Any]:
    state = StreamState.objects.filter(pk=StreamState.SINGLETON_PK).first() or StreamState()
    playlist = Playlist.objects.filter(name=Playlist.DEFAULT_NAME).only("version").first()
    return {
        "channel_name": state.channel_name,
        "live": state.live,
        "transitioning": state.transitioning,
        "upstream_down": state.upstream_down,
        "upstream_detail": state.upstream_detail,
        "upstream_info": state.upstream_info,
        "playlist_version": playlist.version if playlist else 0,
        "switch_started_at": (
            state.switch_started_at.isoformat() if state.switch_started_at else None
        ),
        "current_stream_url": state.current_stream_url,
    }
