"""Who may join ``/ts`` in this process. Past what it can carry, a relay that admits one viewer
more lets every viewer fall behind together; so the next ones are refused at once (503 with
``Retry-After``) and the viewers it has keep their full rate, as Icecast's ``<clients>`` and
nginx's ``limit_conn`` do. With several processes, a proxy in front tries the next one on a 503
(docs/deploy.md).

Two limits, either enough to refuse:

- a fixed cap, ``CHANNELS_MAX_VIEWERS``;
- a guard that needs no tuning (:class:`LoadGuard`): the process is refusing while its event
  loop runs late (a viewer's writer waits that long for its turn) or while a share of its
  viewers' buffers dropped data lately (their writers could not keep up with the stream), and
  for a calm spell after; then it lets viewers in again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

RETRY_AFTER_SEC = 10
TICK_SEC = 0.1  # how often the guard looks
LAG_BOUND_SEC = 0.25  # the event loop this late: viewers are not being served at the live edge
DROPPING_SHARE = 0.2  # ... or this share of the viewers dropped data within WINDOW_SEC
WINDOW_SEC = 3.0
CALM_SEC = 3.0  # refusing goes on this long after the last sign of overload


class LoadGuard:
    """Watches this process's event loop and its viewers' buffers (``drops``: bytes dropped per
    viewer, as :meth:`Hub.viewer_drops` gives them) from a task on the loop."""

    def __init__(self, drops: Callable[[], dict[int, int]]) -> None:
        self._drops = drops
        self._last: dict[int, int] = {}
        self._dropped_at: dict[int, float] = {}  # per viewer: when its buffer last dropped data
        self._overloaded_at = -float("inf")
        self.reason = ""  # why the process refuses, or refused last
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def refusing(self) -> bool:
        return time.monotonic() - self._overloaded_at < CALM_SEC

    async def _watch(self) -> None:
        while True:
            due = time.monotonic() + TICK_SEC
            await asyncio.sleep(TICK_SEC)
            now = time.monotonic()
            self.look(now, lag=now - due)

    def look(self, now: float, *, lag: float) -> None:
        """One look at the loop's ``lag`` (seconds late) and the viewers' drops."""
        drops = self._drops()
        for viewer, dropped in drops.items():
            if dropped > self._last.get(viewer, 0):
                self._dropped_at[viewer] = now
        self._last = drops
        self._dropped_at = {
            viewer: at
            for viewer, at in self._dropped_at.items()
            if viewer in drops and now - at < WINDOW_SEC
        }
        share = len(self._dropped_at) / len(drops) if drops else 0.0
        if lag > LAG_BOUND_SEC:
            self._overloaded_at, self.reason = now, f"its event loop ran {lag:.2f} s late"
        elif share > DROPPING_SHARE:
            self._overloaded_at = now
            self.reason = f"{share:.0%} of its viewers fell behind the stream"


@dataclass
class Admission:
    max_viewers: int | None  # None: no fixed cap
    guard: LoadGuard | None = None
    refused: int = 0  # viewers refused since the process started

    def refusal(self, viewers: int) -> str | None:
        """None when one more viewer may join ``viewers``; else why not (counted)."""
        if self.max_viewers is not None and viewers >= self.max_viewers:
            reason = f"this server carries its most viewers ({self.max_viewers})"
        elif self.guard is not None and self.guard.refusing:
            reason = f"this server is overloaded ({self.guard.reason})"
        else:
            return None
        self.refused += 1
        return f"{reason}: try again shortly"

    def refusing(self, viewers: int) -> bool:
        """Whether the next viewer would be refused."""
        full = self.max_viewers is not None and viewers >= self.max_viewers
        return full or (self.guard is not None and self.guard.refusing)
