"""The start of the current picture group, kept so that a new viewer sees a picture at once.

A player can show nothing until it gets a key frame, and a live stream has one every GOP (often
2-10 s). Broadcast relays (SRS's GOP cache, nginx-rtmp's ``wait_key``) therefore start a new
viewer at the last key frame instead of at the live edge. :class:`GopCache` watches the TS
packets that the hub relays and keeps:

- the latest PAT and PMT (the programme's layout: which PID carries what);
- every packet since the last video random-access point: a packet of the video PID whose
  adaptation field sets the random-access indicator, or whose PES starts with an H.264 IDR or
  SPS, an HEVC IRAP or parameter set, or an MPEG-2 sequence header.

The packets of a chunk are classified with numpy; only the few that start a video PES or carry
PAT or PMT are looked at one by one. The cache is bounded in bytes and in seconds since its key
frame: a group that grows past either is given up until the next key frame, and a new viewer
then starts at the live edge as without a cache.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from channels_admin.streaming.ts import TS_PACKET

PAT_PID = 0
# ISO/IEC 13818-1 stream types of video
H264, HEVC = 0x1B, 0x24
MPEG_VIDEO = frozenset({0x01, 0x02})
VIDEO_STREAM_TYPES = frozenset({H264, HEVC, 0x10, 0x42, 0xD1, 0xEA} | MPEG_VIDEO)
H264_KEY_UNITS = frozenset({5, 7})  # IDR slice, sequence parameter set
HEVC_KEY_UNITS = frozenset(range(16, 24)) | {32, 33}  # IRAP slices, VPS, SPS
MPEG_SEQUENCE_HEADER = b"\x00\x00\x01\xb3"
# MPEG-1/2 audio, AAC (ADTS, LATM), AC-3, E-AC-3
AUDIO_STREAM_TYPES = frozenset({0x03, 0x04, 0x0F, 0x11, 0x81, 0x87})


class StreamLayout(NamedTuple):
    pmt_pid: int
    video_pid: int | None
    audio_pid: int | None


class GopCache:
    def __init__(self, *, max_bytes: int, max_seconds: float) -> None:
        self._max_bytes = max_bytes
        self._max_seconds = max_seconds
        self.clear()

    def clear(self) -> None:
        """Forget everything (a switch: the next channel's layout and key frames differ)."""
        self._pat = b""
        self._pmt = b""
        self._pmt_pid: int | None = None
        self._video_pid: int | None = None
        self._audio_pid: int | None = None
        self._video_type = 0
        self._group: list[bytes] = []
        self._size = 0
        self._since = 0.0  # when the group's key frame arrived (monotonic)

    @property
    def size(self) -> int:
        return self._size

    @property
    def layout_read(self) -> bool:
        """Whether a PAT and a PMT have been read (then :attr:`has_video` is known)."""
        return bool(self._pat and self._pmt)

    @property
    def has_video(self) -> bool:
        return self._video_pid is not None

    @property
    def layout(self) -> StreamLayout | None:
        """The PIDs of the programme's PMT, its video and its first audio, once read."""
        if not self.layout_read or self._pmt_pid is None:
            return None
        return StreamLayout(self._pmt_pid, self._video_pid, self._audio_pid)

    def start(self) -> bytes:
        """What a new viewer gets first: PAT, PMT and the current group; b"" without one."""
        if not self._group or not self._pat or not self._pmt:
            return b""
        return b"".join([self._pat, self._pmt, *self._group])

    def feed(self, data: bytes) -> None:
        """Watch a chunk of whole TS packets on its way to the viewers."""
        if self._max_bytes <= 0 or len(data) < TS_PACKET:
            return
        packets = np.frombuffer(data, np.uint8, len(data) - len(data) % TS_PACKET)
        packets = packets.reshape(-1, TS_PACKET)
        pids = (packets[:, 1].astype(np.uint16) & 0x1F) << 8 | packets[:, 2]
        starts = packets[:, 1] & 0x40 != 0
        for row in np.flatnonzero(starts & (pids == PAT_PID)):
            self._table(bytes(packets[row]), PAT_PID)
        if self._pmt_pid is not None:  # learned from a PAT of this chunk, perhaps
            for row in np.flatnonzero(starts & (pids == self._pmt_pid)):
                self._table(bytes(packets[row]), self._pmt_pid)
        key = None
        if self._video_pid is not None:
            for row in np.flatnonzero(starts & (pids == self._video_pid)):
                if self._is_key(packets[row]):
                    key = int(row)
        if key is not None:
            self._group, self._size = [data[key * TS_PACKET :]], len(data) - key * TS_PACKET
            self._since = time.monotonic()
        elif self._group:
            self._group.append(data)
            self._size += len(data)
            too_old = time.monotonic() - self._since > self._max_seconds
            if self._size > self._max_bytes or too_old:
                self._group, self._size = [], 0

    def _table(self, packet: bytes, pid: int) -> None:
        """Keep a PAT or PMT that fits one packet, and learn the PIDs it names."""
        section = _payload(packet)
        if not section:
            return
        section = section[1 + section[0] :]  # the pointer field
        if len(section) < 12:
            return
        length = (section[1] & 0x0F) << 8 | section[2]
        body = section[8 : min(3 + length, len(section)) - 4]  # without the header and CRC
        if pid == PAT_PID and section[0] == 0x00:
            self._pat = packet
            for at in range(0, len(body) - 3, 4):
                if body[at] << 8 | body[at + 1]:  # program 0 is the network PID
                    self._pmt_pid = (body[at + 2] & 0x1F) << 8 | body[at + 3]
                    break
        elif section[0] == 0x02:
            self._pmt = packet
            info = (body[2] & 0x0F) << 8 | body[3]
            at = 4 + info
            self._video_pid = self._audio_pid = None
            while at + 5 <= len(body):
                stream_type = body[at]
                elementary = (body[at + 1] & 0x1F) << 8 | body[at + 2]
                if stream_type in VIDEO_STREAM_TYPES and self._video_pid is None:
                    self._video_pid, self._video_type = elementary, stream_type
                elif stream_type in AUDIO_STREAM_TYPES and self._audio_pid is None:
                    self._audio_pid = elementary
                at += 5 + ((body[at + 3] & 0x0F) << 8 | body[at + 4])

    def _is_key(self, packet: np.ndarray) -> bool:
        adaptation = packet[3] & 0x20 and packet[4] > 0
        if adaptation and packet[5] & 0x40:  # the random-access indicator
            return True
        payload = _payload(packet.tobytes())
        if len(payload) < 9 or payload[:3] != b"\x00\x00\x01":
            return False
        elementary = payload[9 + payload[8] :]
        if self._video_type in MPEG_VIDEO:
            return MPEG_SEQUENCE_HEADER in elementary
        return any(
            unit in (HEVC_KEY_UNITS if self._video_type == HEVC else H264_KEY_UNITS)
            for unit in _nal_types(elementary, hevc=self._video_type == HEVC)
        )


def _payload(packet: bytes) -> bytes:
    control = packet[3] >> 4 & 0x3
    if not control & 0x1:
        return b""
    start = 4 + (1 + packet[4] if control & 0x2 else 0)
    return packet[start:]


def _nal_types(data: bytes, *, hevc: bool) -> list[int]:
    """The types of the NAL units that start in ``data`` (an Annex B byte stream)."""
    types = []
    at = data.find(b"\x00\x00\x01")
    while at != -1 and at + 3 < len(data):
        header = data[at + 3]
        types.append(header >> 1 & 0x3F if hevc else header & 0x1F)
        at = data.find(b"\x00\x00\x01", at + 3)
    return types
