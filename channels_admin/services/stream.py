"""The active channel: selecting it, pointing the process's hub at it, and recording its status.

The status lives in the database (:class:`StreamState`), written when the admin selects a channel
and when the hub reports that bytes flow or that the upstream is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from channels_admin.errors import ChannelNotFound, UnsupportedStream
from channels_admin.models import Channel, Playlist, StreamState
from channels_admin.streaming.admission import Admission, LoadGuard
from channels_admin.streaming.hub import Hub, HubEvent, Upstream
from channels_admin.streaming.relay import Relay

logger = logging.getLogger(__name__)

RELAYED_SCHEMES = ("http", "https")
# Channel-layer group of the status feeds (WebSocket consumers) of every process.
STATUS_GROUP = "stream-status"

_hub: Hub | None = None
_hub_ready: asyncio.Lock | None = None
_switch_listener: asyncio.Task[None] | None = None
_admission: Admission | None = None


async def stream_hub() -> Hub:
    """This process's hub; the first call resumes the channel that was live before a restart.
    With ``REDIS_URL`` it joins the other processes' hubs through the relay."""
    global _hub, _hub_ready, _switch_listener
    if _hub_ready is None:
        _hub_ready = asyncio.Lock()
    async with _hub_ready:
        if _hub is None:
            relay = (
                Relay(
                    settings.REDIS_URL,
                    prefix=settings.CHANNELS_RELAY_PREFIX,
                    lock_seconds=settings.CHANNELS_RELAY_LOCK_SEC,
                )
                if settings.REDIS_URL
                else None
            )
            hub = Hub(
                connect_timeout=settings.CHANNELS_UPSTREAM_CONNECT_TIMEOUT_SEC,
                read_timeout=settings.CHANNELS_UPSTREAM_READ_TIMEOUT_SEC,
                viewer_buffer_bytes=settings.CHANNELS_VIEWER_BUFFER_BYTES,
                on_event=_hub_event_record,
                relay=relay,
                hls_max_bandwidth=settings.CHANNELS_HLS_MAX_BANDWIDTH,
                gop_cache_bytes=settings.CHANNELS_GOP_CACHE_BYTES,
                gop_cache_seconds=settings.CHANNELS_GOP_CACHE_SEC,
            )
            state = await database_sync_to_async(_state_get)()
            if state.live and state.current_stream_url:
                await hub.switch(
                    Upstream(state.current_stream_url, state.upstream_headers), _generation(state)
                )
            if relay is not None:
                _switch_listener = asyncio.create_task(relay.listen(_switch_followed))
            guard = LoadGuard(hub)
            guard.start()
            stream_admission().guard = guard
            _hub = hub
    return _hub


async def stream_hub_shutdown() -> None:
    """Close this process's upstream connection and end its viewers (server shutdown, tests)."""
    global _hub, _switch_listener
    hub, _hub = _hub, None
    listener, _switch_listener = _switch_listener, None
    if listener is not None:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
    if hub is not None:
        await hub.close()
    guard = stream_admission().guard
    if guard is not None:
        stream_admission().guard = None
        await guard.stop()


async def channel_switch(*, channel_id: str) -> Channel:
    """Make ``channel_id`` the active channel and point the hub (every process's) at it."""
    channel, state = await database_sync_to_async(channel_select)(channel_id=channel_id)
    hub = await stream_hub()
    upstream = Upstream(channel.stream_url, channel.upstream_headers)
    generation = _generation(state)
    await hub.switch(upstream, generation)
    if hub.relay is not None:
        await hub.relay.announce(
            {"url": upstream.url, "headers": dict(upstream.headers), "generation": generation}
        )
    await status_broadcast()
    return channel


async def _switch_followed(switch: dict) -> None:
    """A switch announced by any process: this process's hub follows unless it made it."""
    hub = _hub
    if hub is not None and hub.generation != switch["generation"]:
        await hub.switch(Upstream(switch["url"], switch["headers"]), switch["generation"])


def _generation(state: StreamState) -> str:
    """What names a switch in every process: when it was made, as recorded."""
    return state.switch_started_at.isoformat() if state.switch_started_at else ""


@transaction.atomic
def channel_select(*, channel_id: str) -> tuple[Channel, StreamState]:
    """Record ``channel_id`` as the active channel, switching; raise ChannelNotFound."""
    channel = Channel.objects.filter(
        playlist__name=Playlist.DEFAULT_NAME, channel_id=channel_id
    ).first()
    if channel is None:
        raise ChannelNotFound(channel_id)
    scheme = channel.stream_url.partition("://")[0].lower()
    if scheme not in RELAYED_SCHEMES:
        # Playlists keep such entries (nothing is lost), but the hub relays HTTP only: a
        # file:// or rtmp:// URL is refused here, before anything changes.
        raise UnsupportedStream(
            f"channel {channel_id!r} streams over {scheme}://; only http and https are relayed"
        )
    state, _ = StreamState.objects.update_or_create(
        pk=StreamState.SINGLETON_PK,
        defaults={
            "channel_id": channel.channel_id,
            "channel_name": channel.name,
            "current_stream_url": channel.stream_url,
            "upstream_headers": channel.upstream_headers,
            "live": True,
            "transitioning": True,
            "upstream_down": False,
            "upstream_detail": "",
            "upstream_info": "",
            "switch_started_at": timezone.now(),
        },
    )
    return channel, state


def _state_get() -> StreamState:
    return StreamState.objects.filter(pk=StreamState.SINGLETON_PK).first() or StreamState()


def stream_state_record(*, event: HubEvent, stream_url: str, detail: str = "") -> None:
    """Record what the hub saw; ignored when the channel changed meanwhile."""
    if event is HubEvent.FLOWING:
        fields = {
            "transitioning": False,
            "upstream_down": False,
            "upstream_detail": "",
            "upstream_info": detail[:500],
        }
    elif event is HubEvent.PLAYING:
        fields = {"upstream_info": detail[:500]}
    else:
        fields = {"upstream_down": True, "upstream_detail": detail[:500], "upstream_info": ""}
    StreamState.objects.filter(pk=StreamState.SINGLETON_PK, current_stream_url=stream_url).update(
        **fields, updated_at=timezone.now()
    )


async def _hub_event_record(event: HubEvent, upstream: Upstream, detail: str) -> None:
    if event is HubEvent.DOWN:
        logger.warning("stream down: %s", detail)
    await database_sync_to_async(stream_state_record)(
        event=event, stream_url=upstream.url, detail=detail
    )
    await status_broadcast()


async def status_broadcast() -> None:
    """Tell every status feed that the status changed; each reads it afresh."""
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(STATUS_GROUP, {"type": "status.changed"})


def stream_admission() -> Admission:
    """This process's admission of /ts viewers (channels_admin/streaming/admission.py)."""
    global _admission
    if _admission is None:
        _admission = Admission(max_viewers=settings.CHANNELS_MAX_VIEWERS)
    return _admission


async def viewer_counts() -> dict:
    """``viewers``: every server process's; whether this process is ``refusing_viewers`` now,
    how many it has refused (``viewers_refused``) and cut off when it could not carry them
    (``viewers_shed``) since it started."""
    hub = await stream_hub()
    admission = stream_admission()
    return {
        "viewers": await hub.viewers_total(),
        "refusing_viewers": admission.refusing(hub.viewers),
        "viewers_refused": admission.refused,
        "viewers_shed": admission.guard.shed if admission.guard is not None else 0,
    }


async def viewer_status() -> dict:
    """What the public viewer page may know: no stream URL (it may carry credentials)."""
    status = await database_sync_to_async(_viewer_status)()
    return {**status, **await viewer_counts()}


def _viewer_status() -> dict:
    state = _state_get()
    channel = (
        Channel.objects.filter(playlist__name=Playlist.DEFAULT_NAME, channel_id=state.channel_id)
        .only("logo", "group", "chno")
        .first()
        if state.channel_id
        else None
    )
    version = (
        Playlist.objects.filter(name=Playlist.DEFAULT_NAME)
        .values_list("version", flat=True)
        .first()
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
        "playlist_version": version or 0,
    }
