"""One viewer's place in the stream: a bounded buffer of the chunks the hub hands it.

A viewer that cannot keep up loses the OLDEST chunks (whole chunks of whole packets) instead of
slowing the upstream read or the other viewers; what it lost is counted, for the load guard.

A viewer whose socket is backed up has the chunks that come meanwhile skipped by its writer.
They count as lost only once its socket takes data again: a viewer that reads nothing (a
stalled or hostile client) tells nothing of the server's load, and after
:data:`NOT_READING_SEC` the guard leaves it out altogether (:meth:`Subscription.reads`).
"""

from __future__ import annotations

import asyncio
from collections import deque

# A viewer whose socket has taken nothing for this long does not read: the load guard counts it
# neither as a viewer nor for what it loses.
NOT_READING_SEC = 3.0


class Subscription:
    """One viewer's bounded buffer; when it overflows the oldest chunks are dropped."""

    def __init__(self, limit_bytes: int, *, link: int | None = None) -> None:
        self._limit = limit_bytes
        self.link = link  # the private viewer link it came through; None: none (open stream)
        self.seated = False  # it holds a seat of its link (link_audience.py), given back as it goes
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._wakeup = asyncio.Event()
        self.ended = self.cut_off = False
        self.dropped_bytes = 0  # what this viewer lost: its buffer overflowed, or was skipped
        self.skipped_bytes = 0  # skipped since its socket last took data
        self.stalled_since: float | None = None  # when its socket backed up (monotonic), while

    def widen(self, limit_bytes: int) -> None:
        """Hold at least ``limit_bytes`` from now on (the upstream comes in larger bursts)."""
        self._limit = max(self._limit, limit_bytes)

    def push(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        while self._size > self._limit and len(self._chunks) > 1:
            dropped = self._chunks.popleft()
            self._size -= len(dropped)
            self.dropped_bytes += len(dropped)
        self._wakeup.set()

    def skipped(self, size: int, *, since: float) -> None:
        """The viewer's writer skipped a chunk of ``size`` bytes: its socket has been backed up
        since ``since`` (monotonic). Lost only if the viewer reads again (:meth:`drained`)."""
        self.skipped_bytes += size
        self.stalled_since = since

    def drained(self) -> None:
        """The viewer's socket takes data again: what its writer skipped meanwhile was lost."""
        self.dropped_bytes += self.skipped_bytes
        self.skipped_bytes = 0
        self.stalled_since = None

    def reads(self, now: float) -> bool:
        """Whether the viewer reads: its socket has taken data within ``NOT_READING_SEC``."""
        return self.stalled_since is None or now - self.stalled_since < NOT_READING_SEC

    def end(self, *, cut_off: bool = False) -> None:
        """No more data; ``cut_off``: because the process cannot carry this viewer."""
        self.ended, self.cut_off = True, cut_off
        self._wakeup.set()

    async def next_data(self) -> bytes | None:
        """The oldest buffered chunk (waiting for one), or None once ended.

        One chunk at a time, never joined: under load a viewer's backlog would otherwise be
        copied into ever larger writes just when the CPU is shortest."""
        while not self._chunks:
            if self.ended:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()
        data = self._chunks.popleft()
        self._size -= len(data)
        return data
