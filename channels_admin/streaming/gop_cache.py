"""The start of the current picture group, kept so that a new viewer sees a picture at once.

A player can show nothing until it gets a key frame, and a live stream has one every GOP (often
2-10 s). Broadcast relays (SRS's GOP cache, nginx-rtmp's ``wait_key``) therefore start a new
viewer at the last key frame instead of at the live edge. :class:`GopCache` watches the TS
packets that the hub relays and keeps:

- the latest PAT and PMT (the programme's layout: which PID carries what);
- every packet since the last video random-access point (a key frame, as ``ts_scan.py`` finds
  them: the adaptation field's flag, or an H.264 IDR/SPS, HEVC IRAP or MPEG-2 sequence header
  at a PES start).

The cache is bounded in bytes and in seconds since its key frame: a group that grows past
either is given up until the next key frame, and a new viewer then starts at the live edge as
without a cache.
"""

from __future__ import annotations

import time

from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import ProgramScanner, StreamLayout


class GopCache:
    def __init__(self, *, max_bytes: int, max_seconds: float) -> None:
        self._max_bytes = max_bytes
        self._max_seconds = max_seconds
        self._scanner = ProgramScanner()
        self.clear()

    def clear(self) -> None:
        """Forget everything (a switch: the next channel's layout and key frames differ)."""
        self._scanner.clear()
        self._group: list[bytes] = []
        self._size = 0
        self._since = 0.0  # when the group's key frame arrived (monotonic)

    @property
    def size(self) -> int:
        return self._size

    @property
    def layout(self) -> StreamLayout | None:
        """The programme's PIDs, once its PAT and PMT have been read."""
        return self._scanner.layout

    def start(self) -> bytes:
        """What a new viewer gets first: PAT, PMT and the current group; b"" without one."""
        pat, pmt = self._scanner.pat, self._scanner.pmt
        if not self._group or not pat or not pmt:
            return b""
        return b"".join([pat, pmt, *self._group])

    def feed(self, data: bytes) -> None:
        """Watch a chunk of whole TS packets on its way to the viewers."""
        if self._max_bytes <= 0 or len(data) < TS_PACKET:
            return
        keys = [start.row for start in self._scanner.scan(data) if start.key]
        if keys:
            key = keys[-1]
            self._group, self._size = [data[key * TS_PACKET :]], len(data) - key * TS_PACKET
            self._since = time.monotonic()
        elif self._group:
            self._group.append(data)
            self._size += len(data)
            too_old = time.monotonic() - self._since > self._max_seconds
            if self._size > self._max_bytes or too_old:
                self._group, self._size = [], 0
