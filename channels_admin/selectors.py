"""Reads of the channel admin: channel search, groups, and the stream status."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from channels_admin.models import Channel, Playlist, StreamState
from channels_admin.runtime import stream_runtime
from channels_admin.services.viewers import NO_CHANNEL, Refusal

# About a segment: the first one of a channel is ready this long after its first key frame.
HLS_STARTING_RETRY_AFTER_SEC = 2


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
    }


def _playlist_version() -> int:
    version = (
        Playlist.objects.filter(name=Playlist.DEFAULT_NAME)
        .values_list("version", flat=True)
        .first()
    )
    return version or 0


async def viewer_counts() -> dict[str, Any]:
    """``viewers``: every server process's ``/ts`` viewers and this process's HLS audience
    (``hls_viewers``, an estimate: the clients that fetched the latest segments, each cache in
    front counting once); whether this process is ``refusing_viewers`` now, how many it has
    refused (``viewers_refused``) and cut off when it could not carry them (``viewers_shed``)
    since it started."""
    runtime = stream_runtime()
    hub = await runtime.hub()
    admission = runtime.admission
    hls_viewers = hub.hls.viewers
    return {
        "viewers": await hub.viewers_total() + hls_viewers,
        "hls_viewers": hls_viewers,
        "refusing_viewers": admission.refusing(hub.viewers),
        "viewers_refused": admission.refused,
        "viewers_shed": admission.guard.shed if admission.guard is not None else 0,
    }


async def hls_playlist() -> bytes | Refusal:
    """The active channel's live HLS playlist, or why there is none now. Asking for it starts
    the hub (resuming the channel that was live before a restart), as a ``/ts`` viewer does, so
    an audience of HLS clients alone gets the channel."""
    hub = await stream_runtime().hub()
    if hub.upstream is None:
        return NO_CHANNEL
    playlist = hub.hls.playlist()
    if playlist is None:
        return Refusal("the channel is starting: no segment yet", HLS_STARTING_RETRY_AFTER_SEC)
    return playlist


def hls_segment(*, name: str) -> bytes | None:
    """The bytes of the HLS segment ``name`` (counted as one request for it), or None when it
    is unknown or gone. No database, and no hub built for it: without one there is none."""
    hub = stream_runtime().running_hub
    return None if hub is None else hub.hls.segment(name)
