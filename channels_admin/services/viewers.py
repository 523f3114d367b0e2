"""Joining and leaving ``/ts``: the one place that decides whether a viewer may watch.

A viewer is refused while no channel is selected, and while this process has no room for it
(the fixed cap or the load guard, ``streaming/admission.py``); otherwise it gets a
:class:`Subscription` to the hub, which its consumer reads until the stream ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from channels_admin.runtime import stream_runtime
from channels_admin.streaming.admission import RETRY_AFTER_SEC
from channels_admin.streaming.subscription import Subscription

# Until an administrator picks a channel; soon, as picking one takes a moment.
NO_CHANNEL_RETRY_AFTER_SEC = 5


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
