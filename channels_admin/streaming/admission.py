"""Who may join ``/ts`` in this process. Past what it can carry, a relay that admits one viewer
more lets every viewer fall behind together; so the next ones are refused at once (503 with
``Retry-After``) and the viewers it has keep their full rate, as Icecast's ``<clients>`` and
nginx's ``limit_conn`` do. With several processes, a proxy in front tries the next one on a 503
(docs/deploy.md).

Two limits, either enough to refuse:

- a fixed cap, ``CHANNELS_MAX_VIEWERS``;
- a guard that needs no tuning (:class:`LoadGuard`), which learns the process's room from its
  event loop's lateness and its viewers' losses, cuts off the newest viewers when the process
  cannot keep up with those it has, and probes for room again once all is calm. It counts only
  the viewers that read: a client that reads nothing costs the process next to nothing, and
  what it loses says nothing of the process's load, so it neither takes room nor tells the
  guard the process is short of it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from core.cancellation import task_cancel

RETRY_AFTER_SEC = 10
TICK_SEC = 0.1  # how often the guard looks
LAG_BOUND_SEC = 0.5  # the event loop this late: no viewer joins now ...
LATE_SEC = 1.0  # ... late this long, and no change for a window: it cannot carry the viewers
LOSING_SHARE = 0.2  # this share of the viewers lost data within WINDOW_SEC: they are losing;
# losing for a window while viewers still arrive: no more join ...
MOST = 0.5  # ... more than this share of them (a few slow links are not the process's doing),
LOST_SHARE = 0.05  # having lost this share of the stream between them (no longer full rate),
# once SETTLE_SEC have passed since viewers last arrived or were cut off: it cannot carry them
WINDOW_SEC = 3.0
SETTLE_SEC = 2 * WINDOW_SEC  # time for a crowd's backlog, or a cut's, to drain
BACKOFF = 0.8  # a process that cannot carry its viewers has room for this share of them ...
DEEPEST_CUT = 0.5  # ... and never less than this share, whatever they lost
EXODUS = 0.9  # fewer viewers than this share of the last look's: a look that tells nothing
CALM_SEC = 3.0  # after this long without a sign of overload, the limit rises by RAISE
RAISE = 0.05

logger = logging.getLogger(__name__)


class Viewers(Protocol):
    """What the guard watches (:class:`~channels_admin.streaming.hub.Hub`)."""

    @property
    def streamed_bytes(self) -> int:
        """The bytes of the stream relayed to viewers so far."""

    @property
    def viewers(self) -> int:
        """How many viewers there are, those that read nothing included."""

    def viewer_drops(self) -> dict[int, int]:
        """Per viewer that reads, the bytes of the stream it lost so far."""

    def shed(self, count: int) -> None:
        """End the streams of the ``count`` newest viewers."""


class LoadGuard:
    """Learns how many viewers this process can carry, from a task on its event loop.

    It watches the loop's lateness and the viewers' losses:

    - while the loop is late, no viewer joins: each would only make it later. A crowd arriving
      at once is thus admitted only while the process keeps up with it;
    - viewers losing data, past ``LOSING_SHARE`` of them, may be the process's doing, the
      backlog of viewers who just arrived, or their own slow links: a limit it has does not
      rise meanwhile, and if they go on losing for ``WINDOW_SEC`` while viewers still arrive,
      the process takes no more than it has (the losses a crowd's own arrival causes do not
      hold it below a crowd it can carry);
    - a loop late for ``LATE_SEC`` once the viewers have not changed for ``WINDOW_SEC`` (so that
      the viewers it has are the load), or most of them losing data, ``LOST_SHARE`` of the
      stream between them (no longer full rate), ``SETTLE_SEC`` after viewers last arrived or
      were cut off (time to drain what they left in the buffers), mean that it cannot carry
      them: the limit is cut to ``BACKOFF`` of the viewers' worth of the stream it delivered
      lately (each viewer counts for the share of the stream it did not lose; ``DEEPEST_CUT`` of
      the viewers at least), and the newest viewers beyond it are cut off, so that the others
      get their full rate back.

    While viewers wait at the limit and all is calm, it rises by ``RAISE`` every ``CALM_SEC``,
    probing for room, as TCP's congestion window does. Viewers leaving in numbers cost the loop
    time and lose data on their way out: such looks teach nothing.

    Viewers that read nothing (:meth:`Viewers.viewer_drops` leaves them out) count neither for
    the limit nor for the losses.
    """

    def __init__(self, viewers: Viewers) -> None:
        self._watched = viewers
        self.limit: int | None = None  # the viewers this process has room for; None: unknown
        self.reason = ""  # why it refuses, or refused last
        self.shed = 0  # viewers cut off since the process started
        self._last: dict[int, int] = {}
        self._dropped_at: dict[int, float] = {}  # per viewer: when it last lost data
        # the looks of the last WINDOW_SEC: when, the bytes streamed, each viewer's losses
        self._looks: deque[tuple[float, int, dict[int, int]]] = deque()
        self._late_since: float | None = None  # since when every look found the loop late
        self._losing_since: float | None = None  # since when every look found viewers losing
        self._viewers_before = 0  # at the last look
        self._not_reading = 0  # viewers that read nothing, at the last look
        self._due = float("inf")  # when the next look is due
        self._arrived_at = -float("inf")  # the last viewer to ask to join
        self._calm_since = -float("inf")  # the last sign of overload, or the last raise
        self._cut_at = -float("inf")
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            await task_cancel(self._task)
            self._task = None

    def refuses(self, viewers: int) -> bool:
        """Whether one more viewer is too many for ``viewers`` (all of them: those that read
        nothing are taken off here); a viewer asking counts as an arrival."""
        self._arrived_at = now = time.monotonic()
        if self._late(now):
            if self._late_since is None:
                self.reason = f"its event loop runs {now - self._due:.2f} s late"
            return True
        return self._at_limit(viewers)

    def full(self, viewers: int) -> bool:
        """Whether it refuses now, for the status (not an arrival)."""
        return self._late(time.monotonic()) or self._at_limit(viewers)

    def _at_limit(self, viewers: int) -> bool:
        return self.limit is not None and viewers - self._not_reading >= self.limit

    def _late(self, now: float) -> bool:
        """Late now (its look, due a while ago, still waits for the loop), or at the last look."""
        return now - self._due > LAG_BOUND_SEC or self._late_since is not None

    async def _watch(self) -> None:
        while True:
            self._due = time.monotonic() + TICK_SEC
            await asyncio.sleep(TICK_SEC)
            now = time.monotonic()
            self.look(now, lag=now - self._due)

    def look(self, now: float, *, lag: float) -> None:
        """One look at the loop's ``lag`` (seconds late) and the viewers' losses."""
        drops = self._watched.viewer_drops()
        viewers = len(drops)
        self._not_reading = max(0, self._watched.viewers - viewers)
        self._looks.append((now, self._watched.streamed_bytes, drops))
        # what it delivered counts from the last arrival on: a crowd's work is not the load
        while len(self._looks) > 1 and (
            now - self._looks[0][0] > WINDOW_SEC or self._looks[0][0] < self._arrived_at
        ):
            self._looks.popleft()
        for viewer, dropped in drops.items():
            if dropped > self._last.get(viewer, 0):
                self._dropped_at[viewer] = now
        self._last = drops
        self._dropped_at = {
            viewer: at
            for viewer, at in self._dropped_at.items()
            if viewer in drops and now - at < WINDOW_SEC
        }
        share = len(self._dropped_at) / viewers if viewers else 0.0
        leaving = viewers < self._viewers_before * EXODUS
        self._viewers_before = viewers
        if lag <= LAG_BOUND_SEC or leaving:
            self._late_since = None
        elif self._late_since is None:
            self._late_since, self.reason = now, f"its event loop ran {lag:.2f} s late"
        losing = share > LOSING_SHARE and not leaving
        if not losing:
            self._losing_since = None
        elif self._losing_since is None:
            self._losing_since = now
        # since the viewers last changed: one arrived or asked, some were cut off, many left
        unchanged_for = 0.0 if leaving else now - max(self._arrived_at, self._cut_at)
        late_for = now - self._late_since if self._late_since is not None else 0.0
        if late_for >= LATE_SEC and unchanged_for >= WINDOW_SEC:
            self._cut(now, viewers, self._carried(), self.reason)
        elif losing:
            self._calm_since = now
            carried = self._carried()
            full_rate = carried >= viewers * (1 - LOST_SHARE)
            if share > MOST and not full_rate and unchanged_for >= SETTLE_SEC:
                reason = f"its viewers lost {1 - carried / viewers:.0%} of the stream"
                self._cut(now, viewers, carried, reason)
            elif self.limit is None and now - self._losing_since >= WINDOW_SEC:
                self._limit(max(1, viewers), f"{share:.0%} of its viewers lost data")
        elif self.limit is not None and now - self._calm_since >= CALM_SEC:
            self._calm_since = now
            if viewers >= self.limit:
                self.limit += max(1, round(self.limit * RAISE))

    def _cut(self, now: float, viewers: int, carried: float, reason: str) -> None:
        """Room for ``BACKOFF`` of the viewers' worth it ``carried``: the newest beyond go."""
        self._calm_since = self._cut_at = now
        limit = max(1, int(max(min(viewers, carried) * BACKOFF, viewers * DEEPEST_CUT)))
        self._dropped_at.clear()  # the losses of the load before the cut
        self._looks.clear()
        self._limit(min(limit, self.limit or limit), reason)
        if viewers > self.limit:
            self.shed += viewers - self.limit
            self._watched.shed(viewers - self.limit)

    def _carried(self) -> float:
        """How many viewers' worth of the stream the process delivered over the looks kept:
        each viewer counts for the share of the stream it did not lose."""
        _, streamed_then, drops_then = self._looks[0]
        _, streamed, drops = self._looks[-1]
        if streamed <= streamed_then:
            return len(drops)
        return sum(
            1 - min(1.0, (lost - drops_then.get(viewer, 0)) / (streamed - streamed_then))
            for viewer, lost in drops.items()
        )

    def _limit(self, limit: int, reason: str) -> None:
        logger.warning("refusing viewers past %d: %s", limit, reason)
        self.limit, self.reason = limit, reason


@dataclass
class Admission:
    max_viewers: int | None  # None: no fixed cap
    guard: LoadGuard | None = None
    refused: int = 0  # viewers refused since the process started

    def refusal(self, viewers: int) -> str | None:
        """None when one more viewer may join ``viewers``; else why not (counted)."""
        if self.max_viewers is not None and viewers >= self.max_viewers:
            reason = f"this server carries its most viewers ({self.max_viewers})"
        elif self.guard is not None and self.guard.refuses(viewers):
            reason = f"this server carries all the viewers it can ({self.guard.reason})"
        else:
            return None
        self.refused += 1
        return f"{reason}: try again shortly"

    def refusing(self, viewers: int) -> bool:
        """Whether the next viewer would be refused."""
        full = self.max_viewers is not None and viewers >= self.max_viewers
        return full or (self.guard is not None and self.guard.full(viewers))
