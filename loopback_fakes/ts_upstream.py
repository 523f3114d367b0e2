"""A TS upstream of numbered synthetic packets, for tests of what viewers receive.

Each packet is 188 bytes: the sync byte, three header bytes, an 8-byte sequence number, and
random bytes drawn per connection, so bytes that match across viewers came from one connection.
"""

from __future__ import annotations

import random
import struct

from loopback_fakes.ts_stream import Chunks, TsStream

PACKET = 188
PACKETS_PER_WRITE = 7


def ts_packet(sequence: int, rng: random.Random) -> bytes:
    return b"\x47\x01\x00\x10" + struct.pack(">Q", sequence) + rng.randbytes(PACKET - 12)


def packet_sequence(packet: bytes) -> int:
    return struct.unpack(">Q", packet[4:12])[0]


class TsUpstream(TsStream):
    """Behaviour is switched at run time: ``refuse`` answers 503, ``stall`` stops writing
    (keeping the connection open), ``garbage`` sends bytes that are not TS, ``close_at_once``
    answers 200 and closes without a byte of body, and :meth:`drop` closes every open
    connection."""

    def __init__(self, *, bitrate_bps: int = 2_000_000, prefix: bytes = b"") -> None:
        self.bitrate_bps = bitrate_bps
        self.prefix = prefix  # bytes sent before the first packet (tests packet alignment)
        self.refuse = False
        self.stall = False
        self.garbage = False
        self.close_at_once = False
        super().__init__()

    def _refused(self, path: str) -> bool:
        return self.refuse

    def _chunks(self, path: str) -> Chunks:
        if self.close_at_once:
            return
        rng = random.Random()  # noqa: S311 (test data)
        write_seconds = PACKET * PACKETS_PER_WRITE * 8 / self.bitrate_bps
        if self.prefix:
            yield self.prefix, 0.0
        sequence = 0
        while True:
            if self.stall:
                yield None, 0.0
            elif self.garbage:
                chunk = rng.randbytes(PACKET * PACKETS_PER_WRITE).replace(b"\x47", b"\x00")
                yield chunk, write_seconds
            else:
                chunk = b"".join(ts_packet(sequence + i, rng) for i in range(PACKETS_PER_WRITE))
                sequence += PACKETS_PER_WRITE
                yield chunk, write_seconds
