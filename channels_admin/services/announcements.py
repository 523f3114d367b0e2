"""News through channel-layer groups: the status changed, the schedule or the viewers' access
rule did. It is sent, and a group joined or left, as best it can be: a layer that fails (Redis
down) or does not answer (Redis hung) costs the caller at most :data:`ANNOUNCE_WITHIN_SEC`, is
logged, and never fails what the caller does: a switch, a playlist reload, the server's start,
a hub's start (which reads the access rule, after joining its group).

What is lost is the news, not the change: the schedule's runner looks again every few seconds
and the access follower reads the rule every ``RULES_REREAD_SEC``, news or not. A status feed
hears of a change only this way (and when its page asks); it reads its news through the layer
too, so while Redis is away the feeds end, as before, and their pages try again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

ANNOUNCE_WITHIN_SEC = 2.0


async def group_announce(group: str, message: dict) -> bool:
    """Send ``message`` to ``group`` (no channel layer: nothing to do): whether it went."""
    layer = get_channel_layer()
    if layer is None:
        return True
    return await _best_effort(
        f"announce {message.get('type')} to {group}", layer.group_send(group, message)
    )


async def group_join(group: str, channel: str) -> bool:
    """Add ``channel`` to ``group``, to hear its news: whether it was added."""
    layer = get_channel_layer()
    return await _best_effort(f"join {group}", layer.group_add(group, channel))


async def group_leave(group: str, channel: str) -> None:
    """Take ``channel`` out of ``group`` (harmless if it is not in it)."""
    layer = get_channel_layer()
    await _best_effort(f"leave {group}", layer.group_discard(group, channel))


async def _best_effort(what: str, call: Awaitable[object]) -> bool:
    try:
        async with asyncio.timeout(ANNOUNCE_WITHIN_SEC):
            await call
    except Exception as error:  # the layer's own failure, or its silence past the bound
        logger.warning("could not %s: %r", what, error)
        return False
    return True
