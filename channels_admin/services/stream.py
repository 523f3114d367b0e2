"""The active channel: selecting it and pointing every process's hub at it.

The selection is recorded in the database (:class:`StreamState`) first, so that a restart
resumes it and every process answers alike; the hubs follow (``channels_admin/runtime.py``).
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.db import transaction
from django.utils import timezone

from channels_admin.errors import ChannelNotFound, UnsupportedStream
from channels_admin.models import Channel, StreamState
from channels_admin.runtime import stream_runtime
from channels_admin.services.status import status_broadcast
from channels_admin.streaming.hub import Upstream

RELAYED_SCHEMES = ("http", "https")


async def channel_switch(*, channel_id: str) -> Channel:
    """Make ``channel_id`` the active channel and point the hub (every process's) at it."""
    channel, state = await database_sync_to_async(channel_select)(channel_id=channel_id)
    await stream_runtime().switch(
        Upstream(channel.stream_url, channel.upstream_headers), state.generation
    )
    await status_broadcast()
    return channel


@transaction.atomic
def channel_select(*, channel_id: str) -> tuple[Channel, StreamState]:
    """Record ``channel_id`` as the active channel, switching; raise ChannelNotFound."""
    channel = Channel.objects.of_default_playlist().filter(channel_id=channel_id).first()
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


async def stream_hub_shutdown() -> None:
    """Close this process's upstream connection and end its viewers (server shutdown, tests)."""
    await stream_runtime().close()
