"""What the hub reports to its owner (the runtime): a source plays, what plays changed, a source
failed, the viewers' stream changed."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from channels_admin.streaming.sources import Upstream, source_label


class HubEvent(enum.Enum):
    FLOWING = "flowing"  # a source plays: its first key frame went out to the viewers
    PLAYING = "playing"  # what is playing changed (detail: e.g. "HLS 1280x720, segment 18")
    DOWN = "down"  # the source that played failed (detail: why); the hub fails over
    MISSED = "missed"  # a source tried while none played failed (detail: why)
    # The viewers' stream changed without ending (detail: its format, e.g. "H.264 Main
    # 640x360, AAC"): a player must start afresh. Not the first stream of a switch.
    STREAM = "stream"


@dataclass(frozen=True)
class HubReport:
    """What the hub tells its owner about one of the channel's sources."""

    event: HubEvent
    sources: tuple[Upstream, ...]
    index: int | None  # which source; None: the slate (a STREAM)
    detail: str
    # FLOWING: the source took over from another that failed (for the switch's first source to
    # play, from the primary, which failed to start)
    failover: bool = False
    generation: str = ""  # the switch whose sources these are

    @property
    def label(self) -> str:
        return "slate" if self.index is None else source_label(self.index, len(self.sources))


EventCallback = Callable[[HubReport], Awaitable[None]]
