"""MPEG-TS framing: the packet size, its sync byte, and cutting a byte stream into whole packets.

Everything downstream (the viewers' buffers, the GOP cache, HLS pacing) deals in whole
188-byte packets, so an upstream's bytes are aligned here once, on the way in.
"""

from __future__ import annotations

TS_PACKET = 188
TS_SYNC = 0x47


class PacketAligner:
    """Cuts a byte stream into runs of whole TS packets, finding (and re-finding) the sync."""

    def __init__(self) -> None:
        self._pending = b""
        self._synced = False
        self.skipped = 0  # bytes thrown away while looking for the sync

    def feed(self, data: bytes) -> bytes:
        buffer = self._pending + data if self._pending else data
        if not self._synced or not self._in_sync(buffer):
            start = self._find_sync(buffer)
            if start is None:
                keep = buffer[-(2 * TS_PACKET) :]
                self.skipped += len(buffer) - len(keep)
                self._pending = keep
                return b""
            self.skipped += start
            buffer = buffer[start:]
            self._synced = True
        whole = len(buffer) - len(buffer) % TS_PACKET
        self._pending = buffer[whole:]
        return buffer[:whole]

    @staticmethod
    def _in_sync(buffer: bytes) -> bool:
        syncs = buffer[: len(buffer) - len(buffer) % TS_PACKET : TS_PACKET]
        return syncs.count(TS_SYNC) == len(syncs)

    @staticmethod
    def _find_sync(buffer: bytes) -> int | None:
        """First offset where three consecutive packets start with the sync byte."""
        position = buffer.find(TS_SYNC)
        while position != -1 and position + 2 * TS_PACKET < len(buffer):
            if buffer[position + TS_PACKET] == TS_SYNC == buffer[position + 2 * TS_PACKET]:
                return position
            position = buffer.find(TS_SYNC, position + 1)
        return None
