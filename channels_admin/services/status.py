"""The stream's status: recording what the hub reports, and telling every status feed.

The status lives in the database (:class:`StreamState`), so every server process answers
alike; a change is announced on a channel-layer group, and each feed reads the row afresh
(``selectors.viewer_status``).
"""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from channels_admin.models import StreamState
from channels_admin.streaming.hub import HubEvent, Upstream

logger = logging.getLogger(__name__)

# Channel-layer group of the status feeds (WebSocket consumers) of every process.
STATUS_GROUP = "stream-status"


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


async def hub_event_record(event: HubEvent, upstream: Upstream, detail: str) -> None:
    """The hub's event callback: record the event, then tell the feeds."""
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
