"""Whether a source keeps up with real time, measured by its own clock.

A source can stay connected and keep sending while it falls behind: an overloaded provider, a
throttled link. Bytes alone do not tell (bitrates vary), but the stream carries its clock: the
programme clock reference (PCR) in the adaptation field of one PID's packets, 27 MHz. Over a
window of wall-clock time a source that keeps up advances its PCR by as much; one that sends
10% of real time advances it by a tenth. Players then stall with nothing to play, so the hub
treats such a source as failed (the way Dispatcharr watches FFmpeg's ``speed``).

Samples are taken when chunks arrive, so a source that comes in bursts (an HLS upstream, a
segment at a time) is compared from burst to burst, where its clock is as far along as it gets.
A jump of the clock backwards or by more than a few seconds is a discontinuity (a loop, a new
encoder): the measurement starts again. A stream without a PCR is never judged.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import numpy as np

from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import pcr_base

PCR_HZ = 90_000  # the PCR base; its 27 MHz extension adds nothing a window of seconds needs
PCR_WRAP = 1 << 33
MAX_STEP_SECONDS = 5.0  # a larger jump between two chunks is a discontinuity


class PaceMeter:
    """Feed it a source's chunks; :meth:`slow` says whether over the last ``window_seconds`` the
    stream's clock advanced by less than ``min_ratio`` of the wall clock."""

    def __init__(
        self,
        *,
        window_seconds: float = 10.0,
        min_ratio: float = 0.8,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._window = window_seconds
        self._min_ratio = min_ratio
        self._clock = clock
        self._pid: int | None = None  # the PID whose PCR is followed: the first seen with one
        self._last_pcr: int | None = None
        self._stream_seconds = 0.0
        self._samples: deque[tuple[float, float]] = deque()  # (wall clock, stream seconds)

    def feed(self, data: bytes) -> None:
        pcr = self._last_pcr_in(data)
        if pcr is None:
            return
        now = self._clock()
        if self._last_pcr is not None:
            step = ((pcr - self._last_pcr) % PCR_WRAP) / PCR_HZ
            if step > MAX_STEP_SECONDS:  # backwards (mod 2^33 that is a huge step) or a jump
                self._samples.clear()
                self._stream_seconds = 0.0
            else:
                self._stream_seconds += step
        self._last_pcr = pcr
        self._samples.append((now, self._stream_seconds))
        # Keep one sample from before the window: the base the window is measured from.
        while len(self._samples) > 2 and self._samples[1][0] <= now - self._window:
            self._samples.popleft()

    def ratio(self) -> float | None:
        """Stream seconds per wall-clock second over the window; None until a window of
        samples exists."""
        if len(self._samples) < 2:
            return None
        base_wall, base_stream = self._samples[0]
        wall, stream = self._samples[-1]
        if wall - base_wall < self._window:
            return None
        return (stream - base_stream) / (wall - base_wall)

    def slow(self) -> bool:
        ratio = self.ratio()
        return ratio is not None and ratio < self._min_ratio

    def _last_pcr_in(self, data: bytes) -> int | None:
        """The PCR base of the last packet of the followed PID in ``data`` that carries one."""
        count = len(data) // TS_PACKET
        if count == 0:
            return None
        packets = np.frombuffer(data, np.uint8, count * TS_PACKET).reshape(count, TS_PACKET)
        has_pcr = (packets[:, 3] & 0x20 != 0) & (packets[:, 4] >= 7) & (packets[:, 5] & 0x10 != 0)
        rows = np.flatnonzero(has_pcr)
        if rows.size == 0:
            return None
        pids = (packets[rows, 1].astype(np.int64) & 0x1F) << 8 | packets[rows, 2]
        if self._pid is None:
            self._pid = int(pids[0])
        rows = rows[pids == self._pid]
        if rows.size == 0:
            return None
        return pcr_base(packets[rows[-1]])
