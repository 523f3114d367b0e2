"""The stream's status: recording what the hub reports, and telling every status feed.

The status lives in the database (:class:`StreamState`), so every server process answers
alike; a change is announced on a channel-layer group, and each feed reads the row afresh
(``selectors.viewer_status``).
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.db.models import F
from django.utils import timezone

from channels_admin.models import StreamState
from channels_admin.services.announcements import group_announce
from channels_admin.streaming.hub_events import HubEvent, HubReport

# Channel-layer group of the status feeds (WebSocket consumers) of every process.
STATUS_GROUP = "stream-status"


def stream_state_record(*, report: HubReport) -> None:
    """Record what the hub saw; ignored when the channel changed meanwhile."""
    event, now = report.event, timezone.now()
    if event is HubEvent.FLOWING:
        fields = {
            "transitioning": False,
            "upstream_down": False,
            "upstream_detail": "",
            "upstream_info": report.detail[:500],
            "source_index": report.index,
        }
        if report.failover:  # counted as it shows: another source plays, one failed
            fields["failovers"] = F("failovers") + 1
    elif event is HubEvent.PLAYING:
        fields = {"upstream_info": report.detail[:500]}
    elif event is HubEvent.STREAM:
        fields = {"stream_serial": F("stream_serial") + 1, "stream_format": report.detail[:100]}
    else:
        fields = {
            "upstream_down": True,
            "upstream_detail": report.detail[:500],
            "upstream_info": "",
            "source_index": None,
            "last_failure": report.detail[:500],
            "last_failure_source": report.label,
            "last_failure_at": now,
        }
    StreamState.objects.filter(
        pk=StreamState.SINGLETON_PK, current_stream_url=report.sources[0].url
    ).update(**fields, updated_at=now)


class StatusRecorder:
    """What the runtime reports (``runtime.StreamEvents``), recorded as the status: the app
    supplies it to the runtime (``apps.py``)."""

    async def hub_reported(self, report: HubReport) -> None:
        """Record the hub's event, then tell the feeds."""
        await database_sync_to_async(stream_state_record)(report=report)
        await status_broadcast()


async def status_broadcast() -> None:
    """Tell every status feed that the status changed; each reads it afresh (as best it can:
    ``announcements.py``)."""
    await group_announce(STATUS_GROUP, {"type": "status.changed"})
