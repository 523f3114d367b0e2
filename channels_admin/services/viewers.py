"""Joining and leaving ``/ts`` and ``/hls/``: the one place that decides whether a viewer may
watch, and counts the viewers.

A viewer is refused while no channel is selected, and while this process has no room for it
(the fixed cap or the load guard, ``streaming/admission.py``); otherwise it gets a
:class:`Subscription` to the hub, which its consumer reads until the stream ends. An HLS viewer
joins by asking for the playlist, which starts the hub as a ``/ts`` viewer does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels_admin.runtime import stream_runtime
from channels_admin.streaming.admission import RETRY_AFTER_SEC
from channels_admin.streaming.subscription import Subscription

# Until an administrator picks a channel; soon, as picking one takes a moment.
NO_CHANNEL_RETRY_AFTER_SEC = 5
# About a segment: the first one of a channel is ready this long after its first key frame.
HLS_STARTING_RETRY_AFTER_SEC = 2


@dataclass(frozen=True)
class Refusal:
    """Why a viewer may not join now, and in how many seconds to try again."""

    reason: str
    retry_after_sec: int


NO_CHANNEL = Refusal(
    "no channel selected: an administrator must pick one first", NO_CHANNEL_RETRY_AFTER_SEC
)


async def viewer_join() -> Subscription | Refusal:
    """A new viewer's subscription to the stream, or why it may not have one now (counted
    by the admission)."""
    runtime = stream_runtime()
    hub = await runtime.hub()
    if hub.upstream is None:
        return NO_CHANNEL
    refused = runtime.admission.refusal(hub.viewers)
    if refused is not None:
        return Refusal(refused, RETRY_AFTER_SEC)
    return hub.subscribe()


async def viewer_leave(*, subscription: Subscription) -> None:
    """The viewer of ``subscription`` has gone. After a shutdown no hub is running and none is
    built for this: building one would open the upstream connection again."""
    hub = stream_runtime().running_hub
    if hub is not None:
        hub.unsubscribe(subscription)


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
