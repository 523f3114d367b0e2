"""Reading an MPEG-TS programme as it passes: its layout (PAT, PMT) and where its PES start.

The GOP cache (``gop_cache.py``) and the HLS output (``hls_output.py``) both watch the chunks
the hub relays and need the same few facts: the latest PAT and PMT, which PID carries the
video, and at which packets a video random-access point (a key frame) starts. A key frame is a
packet of the video PID whose adaptation field sets the random-access indicator, or whose PES
starts with an H.264 IDR or SPS, an HEVC IRAP or parameter set, or an MPEG-2 sequence header.

The packets of a chunk are classified with numpy; only the few that start a PES of the clock
PID or carry PAT or PMT are looked at one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
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
AC3, EAC3 = 0x81, 0x87
AUDIO_STREAM_TYPES = frozenset({0x03, 0x04, 0x0F, 0x11, AC3, EAC3})
# DVB carries AC-3 and E-AC-3 as private data (stream type 0x06), told apart by a descriptor of
# the stream (ETSI EN 300 468 annex D: tags 0x6A and 0x7A) or a registration descriptor (0x05)
# naming the format: such a stream is read as the stream type ATSC gives that codec.
PRIVATE_DATA = 0x06
PRIVATE_AUDIO_TAGS = {0x6A: AC3, 0x7A: EAC3}
PRIVATE_AUDIO_FORMATS = {b"AC-3": AC3, b"EAC3": EAC3}
PTS_HZ = 90_000
PTS_WRAP = 1 << 33


@dataclass(frozen=True)
class PesStart:
    """A PES that starts in a chunk, on the programme's clock PID."""

    row: int  # the packet's index in the chunk
    key: bool  # a video random-access point
    pts: int | None  # its presentation time stamp (90 kHz), when the header has one


def private_audio_type(descriptors: bytes) -> int | None:
    """The audio stream type that a private-data stream's descriptors name (DVB's AC-3 and
    E-AC-3), or None."""
    at = 0
    while at + 2 <= len(descriptors):
        tag, length = descriptors[at], descriptors[at + 1]
        content = descriptors[at + 2 : at + 2 + length]
        if tag in PRIVATE_AUDIO_TAGS:
            return PRIVATE_AUDIO_TAGS[tag]
        if tag == 0x05 and content[:4] in PRIVATE_AUDIO_FORMATS:
            return PRIVATE_AUDIO_FORMATS[content[:4]]
        at += 2 + length
    return None


class StreamLayout(NamedTuple):
    pmt_pid: int
    video_pid: int | None
    audio_pid: int | None


class ProgramScanner:
    """The layout of the programme seen so far, and the PES starts of each chunk fed.

    The clock PID is the video PID, or without video the first elementary stream the PMT
    names (so an audio-only programme still has a time line)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget the layout (another stream follows, whose PIDs may differ)."""
        self.pat = b""
        self.pmt = b""
        self._pmt_pid: int | None = None
        self.video_pid: int | None = None
        self.audio_pid: int | None = None
        self.video_type = self.audio_type = 0  # their ISO/IEC 13818-1 stream types
        self.clock_pid: int | None = None

    @property
    def layout(self) -> StreamLayout | None:
        """The PIDs of the programme's PMT, its video and its first audio, once a PAT and a
        PMT have been read."""
        if not self.pat or not self.pmt or self._pmt_pid is None:
            return None
        return StreamLayout(self._pmt_pid, self.video_pid, self.audio_pid)

    def scan(self, data: bytes) -> list[PesStart]:
        """Learn from the PAT and PMT in ``data`` (whole TS packets), then list the PES that
        start on the clock PID, in order."""
        if len(data) < TS_PACKET:
            return []
        packets = np.frombuffer(data, np.uint8, len(data) - len(data) % TS_PACKET)
        packets = packets.reshape(-1, TS_PACKET)
        pids = (packets[:, 1].astype(np.uint16) & 0x1F) << 8 | packets[:, 2]
        starts = packets[:, 1] & 0x40 != 0
        for row in np.flatnonzero(starts & (pids == PAT_PID)):
            self._table(bytes(packets[row]), PAT_PID)
        if self._pmt_pid is not None:  # learned from a PAT of this chunk, perhaps
            for row in np.flatnonzero(starts & (pids == self._pmt_pid)):
                self._table(bytes(packets[row]), self._pmt_pid)
        if self.clock_pid is None:
            return []
        video = self.clock_pid == self.video_pid
        return [
            PesStart(int(row), video and self._is_key(packets[row]), pes_pts(packets[row]))
            for row in np.flatnonzero(starts & (pids == self.clock_pid))
        ]

    def _table(self, packet: bytes, pid: int) -> None:
        """Keep a PAT or PMT that fits one packet, and learn the PIDs it names."""
        section = packet_payload(packet)
        if not section:
            return
        section = section[1 + section[0] :]  # the pointer field
        if len(section) < 12:
            return
        length = (section[1] & 0x0F) << 8 | section[2]
        body = section[8 : min(3 + length, len(section)) - 4]  # without the header and CRC
        if pid == PAT_PID and section[0] == 0x00:
            self.pat = packet
            for at in range(0, len(body) - 3, 4):
                if body[at] << 8 | body[at + 1]:  # program 0 is the network PID
                    self._pmt_pid = (body[at + 2] & 0x1F) << 8 | body[at + 3]
                    break
        elif section[0] == 0x02:
            self.pmt = packet
            info = (body[2] & 0x0F) << 8 | body[3]
            at = 4 + info
            self.video_pid = self.audio_pid = self.clock_pid = None
            self.video_type = self.audio_type = 0
            while at + 5 <= len(body):
                stream_type = body[at]
                elementary = (body[at + 1] & 0x1F) << 8 | body[at + 2]
                described = 5 + ((body[at + 3] & 0x0F) << 8 | body[at + 4])
                if stream_type == PRIVATE_DATA:
                    stream_type = private_audio_type(body[at + 5 : at + described]) or stream_type
                if self.clock_pid is None:
                    self.clock_pid = elementary
                if stream_type in VIDEO_STREAM_TYPES and self.video_pid is None:
                    self.video_pid = self.clock_pid = elementary
                    self.video_type = stream_type
                elif stream_type in AUDIO_STREAM_TYPES and self.audio_pid is None:
                    self.audio_pid = elementary
                    self.audio_type = stream_type
                at += described

    def _is_key(self, packet: np.ndarray) -> bool:
        adaptation = packet[3] & 0x20 and packet[4] > 0
        if adaptation and packet[5] & 0x40:  # the random-access indicator
            return True
        payload = packet_payload(packet.tobytes())
        if len(payload) < 9 or payload[:3] != b"\x00\x00\x01":
            return False
        elementary = payload[9 + payload[8] :]
        if self.video_type in MPEG_VIDEO:
            return MPEG_SEQUENCE_HEADER in elementary
        return any(
            unit in (HEVC_KEY_UNITS if self.video_type == HEVC else H264_KEY_UNITS)
            for unit in _nal_types(elementary, hevc=self.video_type == HEVC)
        )


def pes_pts(packet: np.ndarray | bytes) -> int | None:
    """The PTS of the PES that starts in ``packet``, if its header carries one."""
    at = pes_pts_at(packet)
    return timestamp_at(packet, at) if at else None


def pes_pts_at(packet: np.ndarray | bytes) -> int:
    """Where in ``packet`` the PTS of the PES that starts there lies (a DTS, when the header
    has one, follows it); 0 without one."""
    data = bytes(packet)
    control = data[3] >> 4 & 0x3
    if not control & 0x1:
        return 0
    at = 4 + (1 + data[4] if control & 0x2 else 0)
    if at + 14 > len(data) or data[at : at + 3] != b"\x00\x00\x01" or not data[at + 7] & 0x80:
        return 0
    return at + 9


def timestamp_at(packet: np.ndarray | bytes, at: int) -> int:
    """The 33-bit PTS or DTS written at ``at`` in ``packet`` (90 kHz ticks)."""
    b = [int(value) for value in packet[at : at + 5]]
    return (b[0] >> 1 & 0x07) << 30 | b[1] << 22 | (b[2] >> 1) << 15 | b[3] << 7 | b[4] >> 1


def pcr_base(packet: np.ndarray | bytes) -> int:
    """The 33-bit base (90 kHz ticks) of the PCR that ``packet``'s adaptation field carries."""
    b = [int(value) for value in packet[6:11]]
    return b[0] << 25 | b[1] << 17 | b[2] << 9 | b[3] << 1 | b[4] >> 7


def pid_rows(data: bytes, pid: int) -> list[int]:
    """The indexes of ``data``'s packets (whole TS packets) that carry ``pid``, in order."""
    count = len(data) // TS_PACKET
    if count == 0:
        return []
    packets = np.frombuffer(data, np.uint8, count * TS_PACKET).reshape(count, TS_PACKET)
    pids = (packets[:, 1].astype(np.uint16) & 0x1F) << 8 | packets[:, 2]
    return np.flatnonzero(pids == pid).tolist()


def pes_elementary(payload: bytes) -> bytes | None:
    """The elementary stream's bytes in ``payload``, the payload of a packet that starts a
    PES, after the PES header; None when it holds no PES header."""
    if len(payload) < 9 or payload[:3] != b"\x00\x00\x01":
        return None
    return payload[9 + payload[8] :]


def packet_payload(packet: bytes) -> bytes:
    """What ``packet`` carries after its header and adaptation field."""
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
