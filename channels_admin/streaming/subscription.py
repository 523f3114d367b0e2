"""One viewer's place in the stream: a bounded buffer of the chunks the hub hands it.

A viewer that cannot keep up loses the OLDEST chunks (whole chunks of whole packets) instead of
slowing the upstream read or the other viewers; what it lost is counted, for the load guard.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Subscription:
    """One viewer's bounded buffer; when it overflows the oldest chunks are dropped."""

    def __init__(self, limit_bytes: int) -> None:
        self._limit = limit_bytes
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._wakeup = asyncio.Event()
        self.ended = self.cut_off = False
        self.dropped_bytes = 0  # what this viewer lost: its buffer overflowed, or was skipped

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

    def skipped(self, size: int) -> None:
        """The viewer's writer skipped a chunk of ``size`` bytes (its socket was backed up)."""
        self.dropped_bytes += size

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
