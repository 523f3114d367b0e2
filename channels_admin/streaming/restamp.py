"""One time line for the viewers, whatever source plays: timestamps shifted at each change.

Every source has a clock of its own: after a failover the next source's timestamps are
anywhere, often behind the last ones a viewer got. FFmpeg copes; a browser player does not:
mpegts.js drops every audio frame that would go back in time and its video waits for pictures
that never come (the stream looks frozen). Broadcast splicers solve it by shifting the new
stream's clock so that it goes on from where the last one ended; :class:`Restamper` does the
same to the TS packets on their way out: at each :meth:`begin` (a source starts, the slate
starts) it picks an offset that puts the new stream's first PES a frame after the latest
timestamp sent, and adds it to every PTS, DTS and PCR that follows, modulo 2^33.

Only packets that start a PES or carry a PCR are touched, a few hundred a second; they are
found with numpy and rewritten in place in a copy of the chunk.
"""

from __future__ import annotations

import numpy as np

from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import pcr_base, pes_pts_at, timestamp_at

WRAP = 1 << 33  # PTS, DTS and the PCR base count 90 kHz ticks modulo 2^33
STEP = 3600  # 40 ms: the gap left between the last timestamp sent and the next stream's first


class Restamper:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A new channel: its viewers start afresh, so its own timestamps go out as they are."""
        self._offset = 0
        self._latest: int | None = None  # the latest timestamp sent, unwrapped
        self._pending = False

    def begin(self) -> None:
        """Another stream follows: its timestamps are shifted to go on from the latest sent."""
        self._pending = True

    def feed(self, data: bytes) -> bytes:
        """``data`` (whole TS packets) with its timestamps shifted."""
        count = len(data) // TS_PACKET
        if count == 0:
            return data
        packets = np.frombuffer(data, np.uint8, count * TS_PACKET).reshape(count, TS_PACKET)
        adaptation = packets[:, 3] & 0x20 != 0
        pcr_rows = np.flatnonzero(adaptation & (packets[:, 4] >= 7) & (packets[:, 5] & 0x10 != 0))
        starts = np.flatnonzero((packets[:, 1] & 0x40 != 0) & (packets[:, 3] & 0x10 != 0))
        pts_at = {row: at for row in starts.tolist() if (at := pes_pts_at(packets[row]))}
        if self._pending and pts_at:
            stamps = [timestamp_at(packets[row], at) for row, at in pts_at.items()]
            # the earliest of them: audio may start a little before the key frame's picture
            first = (stamps[0] + min(_signed(stamp - stamps[0]) for stamp in stamps)) % WRAP
            if self._latest is not None:
                self._offset = (self._latest + STEP - first) % WRAP
            self._pending = False
        if not self._offset and not pts_at:
            return data
        out = bytearray(data)
        view = np.frombuffer(out, np.uint8, count * TS_PACKET).reshape(count, TS_PACKET)
        for row, at in pts_at.items():
            packet = view[row]
            pts = (timestamp_at(packet, at) + self._offset) % WRAP
            if self._offset:
                _write_timestamp(packet, at, pts)
                if packet[at - 2] & 0xC0 == 0xC0:  # a DTS follows the PTS
                    dts = (timestamp_at(packet, at + 5) + self._offset) % WRAP
                    _write_timestamp(packet, at + 5, dts)
            self._note(pts)
        if self._offset:
            for row in pcr_rows.tolist():
                _shift_pcr(view[row], self._offset)
        return bytes(out)

    def _note(self, pts: int) -> None:
        """Keep the latest timestamp sent, unwrapped (a step back is not a new latest)."""
        if self._latest is None:
            self._latest = pts
            return
        step = (pts - self._latest) % WRAP
        if step < WRAP // 2:
            self._latest += step


def _signed(step: int) -> int:
    """A difference of timestamps modulo 2^33, as the nearest step forwards or backwards."""
    return (step + WRAP // 2) % WRAP - WRAP // 2


def _write_timestamp(packet: np.ndarray, at: int, value: int) -> None:
    packet[at] = (int(packet[at]) & 0xF1) | (value >> 29 & 0x0E)
    packet[at + 1] = value >> 22 & 0xFF
    packet[at + 2] = (value >> 14 & 0xFE) | 1
    packet[at + 3] = value >> 7 & 0xFF
    packet[at + 4] = (value << 1 & 0xFE) | 1


def _shift_pcr(packet: np.ndarray, offset: int) -> None:
    base = (pcr_base(packet) + offset) % WRAP
    packet[6] = base >> 25 & 0xFF
    packet[7] = base >> 17 & 0xFF
    packet[8] = base >> 9 & 0xFF
    packet[9] = base >> 1 & 0xFF
    packet[10] = (base & 1) << 7 | (int(packet[10]) & 0x7F)
