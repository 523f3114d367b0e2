"""Reads of the channel admin: channel search, groups, and the stream status."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from channels_admin.models import Channel, Playlist, StreamState
from channels_admin.runtime import stream_runtime


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
    }


def _sources_status(state: StreamState) -> dict[str, Any]:
    """Which source plays (``primary``, ``backup 2 of 3``; "" while none does), of how many,
    and whether the hub is looking for one (the slate plays meanwhile)."""
    return {
        "source": state.source_label,
        "sources": len(state.source_list),
        "reconnecting": state.live and state.upstream_down,
    }


def viewer_status() -> dict[str, Any]:
    """What the public viewer page may know: no stream URL (it may carry credentials)."""
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
    }


def _playlist_version() -> int:
    version = (
        Playlist.objects.filter(name=Playlist.DEFAULT_NAME)
        .values_list("version", flat=True)
        .first()
    )
    return version or 0


async def viewer_counts() -> dict[str, Any]:
    """``viewers``: every server process's; whether this process is ``refusing_viewers`` now,
    how many it has refused (``viewers_refused``) and cut off when it could not carry them
    (``viewers_shed``) since it started."""
    runtime = stream_runtime()
    hub = await runtime.hub()
    admission = runtime.admission
    return {
        "viewers": await hub.viewers_total(),
        "refusing_viewers": admission.refusing(hub.viewers),
        "viewers_refused": admission.refused,
        "viewers_shed": admission.guard.shed if admission.guard is not None else 0,
    }
