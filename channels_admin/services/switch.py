"""The channel switch: selecting the active channel, pointing every process's hub at it, and
how it went.

The selection is recorded in the database (:class:`StreamState`) first, so that a restart
resumes it and every process answers alike; the hubs follow (``channels_admin/runtime.py``).
A switch ends with a sentence (``switch_message``) for the administrator and, when the hub went
back, for the viewers too (``switch_returned``): the channel plays; or none of its sources showed
a picture in time, and the hub went back to the channel that played before (a switch to a dead
channel must not take every viewer off the air). The runtime tells how the switch went
(:meth:`StreamRuntime.switch_outcome`), from the hub's first picture of it.
"""

from __future__ import annotations

import dataclasses

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from channels_admin.errors import ChannelNotFound, UnsupportedStream
from channels_admin.models import Channel, StreamState
from channels_admin.runtime import SwitchOutcome, stream_runtime
from channels_admin.selectors import channel_sources, channel_still
from channels_admin.services.status import status_broadcast
from channels_admin.streaming.sources import Upstream

RELAYED_SCHEMES = ("http", "https")


async def channel_switch(*, channel_id: str) -> Channel:
    """Make ``channel_id`` the active channel and point the hub (every process's) at it; if
    it shows no picture in ``CHANNELS_SWITCH_TIMEOUT_SEC``, go back to the channel before."""
    channel, _ = await channel_switch_recorded(channel_id=channel_id)
    return channel


async def channel_switch_recorded(
    *, channel_id: str, message: str = "Switching to {name}…"
) -> tuple[Channel, StreamState]:
    """:func:`channel_switch`, its first sentence ``message`` (``{name}``: the channel's name;
    the schedule's says it is scheduled), returning the row as recorded too: its
    ``generation`` names the switch."""
    before = await database_sync_to_async(StreamState.load)()
    channel, state = await _switch(channel_id=channel_id, message=message)
    can_return = before.live and before.channel_id and before.channel_id != channel.channel_id
    stream_runtime().watch(_outcome(state=state, back_to=before if can_return else None))
    return channel, state


async def _switch(
    *, channel_id: str, message: str, returned: bool = False
) -> tuple[Channel, StreamState]:
    channel, state, sources = await database_sync_to_async(channel_select)(
        channel_id=channel_id, message=message, returned=returned
    )
    await stream_runtime().switch(sources, state.generation)
    await status_broadcast()
    return channel, state


async def _outcome(
    *, state: StreamState, back_to: StreamState | None, returned: bool = False
) -> None:
    """Wait for the switch to ``state`` to show a picture, and say how it went: the channel
    plays; or it does not, and the hub goes back to ``back_to`` (None: it stays and keeps
    trying). ``returned``: this switch is such a return, whose sentence already says why."""
    outcome = await stream_runtime().switch_outcome(
        state.generation, within=settings.CHANNELS_SWITCH_TIMEOUT_SEC
    )
    if outcome is SwitchOutcome.SUPERSEDED:
        return  # its own watch says how the switch that came since went
    now = await database_sync_to_async(StreamState.load)()
    if now.generation != state.generation:
        return
    # The row too says the switch plays when the owner of the upstream (another process) saw
    # its first picture and the news of it was lost on the way here.
    if outcome is SwitchOutcome.PLAYS or not now.transitioning:
        if not returned:
            await _message_record(state, f"Now playing {state.channel_name}")
        return
    name = state.channel_name
    failed = f"{name} did not answer ({now.last_failure or 'no picture'})"
    if returned:
        await _message_record(state, f"{state.switch_message}; {failed} either: still trying")
        return
    if back_to is None:
        await _message_record(state, f"{failed}: still trying")
        return
    try:
        _, back = await _switch(
            channel_id=back_to.channel_id,
            message=f"{failed}: back on {back_to.channel_name}",
            returned=True,
        )
    except (ChannelNotFound, UnsupportedStream):
        await _message_record(
            state, f"{failed}, and {back_to.channel_name} is gone from the playlist: still trying"
        )
        return
    stream_runtime().watch(_outcome(state=back, back_to=None, returned=True))


async def _message_record(state: StreamState, message: str) -> None:
    await database_sync_to_async(
        StreamState.objects.filter(
            pk=StreamState.SINGLETON_PK, switch_started_at=state.switch_started_at
        ).update
    )(switch_message=message[:500])
    await status_broadcast()


@transaction.atomic
def channel_select(
    *, channel_id: str, message: str = "", returned: bool = False
) -> tuple[Channel, StreamState, list[Upstream]]:
    """Record ``channel_id`` as the active channel, switching; raise ChannelNotFound. Returns
    the channel, the row, and the channel's sources in the order to try them.
    ``message``: the switch's first sentence, ``{name}`` standing for the channel's name;
    ``returned``: the switch goes back to this channel, the one chosen having failed."""
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
    sources = channel_sources(channel=channel)
    if channel_still(channel=channel):  # its picture is still by design: never judged
        sources = [dataclasses.replace(source, picture_checks=False) for source in sources]
    state, _ = StreamState.objects.update_or_create(
        pk=StreamState.SINGLETON_PK,
        defaults={
            "channel_id": channel.channel_id,
            "channel_name": channel.name,
            "current_stream_url": channel.stream_url,
            "upstream_headers": channel.upstream_headers,
            "sources": [source.as_record() for source in sources],
            "source_index": None,
            "failovers": 0,
            "last_failure": "",
            "last_failure_source": "",
            "last_failure_at": None,
            "switch_message": message.replace("{name}", channel.name)[:500],
            "switch_returned": returned,
            "stream_format": "",  # the switch's first stream is no change (stream_serial)
            "live": True,
            "transitioning": True,
            "upstream_down": False,
            "upstream_detail": "",
            "upstream_info": "",
            "switch_started_at": timezone.now(),
        },
    )
    return channel, state, sources
