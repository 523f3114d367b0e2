"""What a relayed stream is, read from its packets: ``H.264 Main 640x360, AAC``.

A browser player is set up for one stream: its codecs, the H.264 profile, the picture size.
mpegts.js in Chromium froze for good when the Main-profile slate gave way to a Baseline source
of the same size (issue 48): it noticed the change ("Critical h264 metadata has been changed")
but never showed another picture. So the hub tells its viewers of every change of stream, and
:class:`FormatWatch` says what each one is, and when it changes within a source: the PMT names
the codecs, and each video key frame's parameter set (H.264 or HEVC SPS, MPEG-2 sequence header)
the profile and the picture size.

Only the first packets of a key frame's PES are read (the parameter sets come first), about one
a second; the scanning of every chunk is numpy's (``ts_scan.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import H264, HEVC, MPEG_VIDEO, ProgramScanner, packet_payload

# A stream whose format is not read in this many bytes is told as far as it is known.
GIVE_UP_BYTES = 1024 * 1024
PARAMETER_BYTES = 2048  # a key frame's parameter sets lie within its PES's first bytes
VIDEO_NAMES = {
    H264: "H.264",
    HEVC: "HEVC",
    0x01: "MPEG-1 video",
    0x02: "MPEG-2 video",
    0x10: "MPEG-4 video",
    0x42: "AVS video",
    0xD1: "Dirac",
    0xEA: "VC-1",
}
AUDIO_NAMES = {
    0x03: "MPEG audio",
    0x04: "MPEG audio",
    0x0F: "AAC",
    0x11: "AAC (LATM)",
    0x81: "AC-3",
    0x87: "E-AC-3",
}
H264_PROFILES = {
    66: "Baseline",
    77: "Main",
    88: "Extended",
    100: "High",
    110: "High 10",
    122: "High 4:2:2",
    244: "High 4:4:4",
}
# The H.264 profiles whose SPS says its chroma format and bit depths (ITU-T H.264 7.3.2.1.1)
H264_CHROMA_PROFILES = frozenset({100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135})
HEVC_PROFILES = {1: "Main", 2: "Main 10", 3: "Main Still Picture", 4: "Range Extensions"}
PICTURES_READ = frozenset({H264, HEVC} | MPEG_VIDEO)  # the codecs whose parameter sets are read


class Picture(NamedTuple):
    """What a video key frame's parameter set says."""

    profile: str
    width: int
    height: int


class FormatWatch:
    """Reads the format of the stream it is fed, chunk by chunk."""

    def __init__(self) -> None:
        self._scanner = ProgramScanner()
        self.restart()

    def restart(self) -> None:
        """Another stream follows: its format is read afresh."""
        self._scanner.clear()
        self.format: str | None = None  # as far as read; None until then
        self._read_bytes = 0

    def feed(self, data: bytes) -> str | None:
        """Watch a chunk of whole TS packets: the stream's format if this chunk told it first
        or changed it, else None. The format is read at the stream's first video key frame
        whose parameter set is read here (at once for a stream without video, or with a codec
        whose parameter sets are not read), else told as far as it is known after
        :data:`GIVE_UP_BYTES`."""
        scanner = self._scanner
        starts = scanner.scan(data)
        if scanner.layout is not None and scanner.video_type not in PICTURES_READ:
            return self._told(self._text(None))
        for start in starts:
            if start.key:
                picture = _picture(scanner.video_type, _pes_start(data, start.row))
                if picture is not None:
                    return self._told(self._text(picture))
        if self.format is None:
            self._read_bytes += len(data)
            if self._read_bytes > GIVE_UP_BYTES:
                return self._told(self._text(None))
        return None

    def _told(self, text: str) -> str | None:
        if text == self.format:
            return None
        self.format = text
        return text

    def _text(self, picture: Picture | None) -> str:
        scanner = self._scanner
        video = VIDEO_NAMES.get(scanner.video_type, "") if scanner.video_pid is not None else ""
        if video and picture is not None:
            video = " ".join(
                filter(None, [video, picture.profile, f"{picture.width}x{picture.height}"])
            )
        audio = AUDIO_NAMES.get(scanner.audio_type, "") if scanner.audio_pid is not None else ""
        return ", ".join(filter(None, [video, audio]))


def _pes_start(data: bytes, row: int) -> bytes:
    """The first elementary-stream bytes (up to :data:`PARAMETER_BYTES`) of the PES that starts
    at packet ``row`` of ``data``, from its packets in this chunk."""
    first = data[row * TS_PACKET : (row + 1) * TS_PACKET]
    pid = (first[1] & 0x1F) << 8 | first[2]
    payload = packet_payload(first)
    if len(payload) < 9 or payload[:3] != b"\x00\x00\x01":
        return b""
    parts = [payload[9 + payload[8] :]]
    size = len(parts[0])
    for at in range((row + 1) * TS_PACKET, len(data) - TS_PACKET + 1, TS_PACKET):
        if size >= PARAMETER_BYTES:
            break
        if (data[at + 1] & 0x1F) << 8 | data[at + 2] != pid:
            continue
        if data[at + 1] & 0x40:  # the next PES
            break
        part = packet_payload(data[at : at + TS_PACKET])
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def _picture(video_type: int, elementary: bytes) -> Picture | None:
    """What the parameter set at the start of a key frame's elementary stream says; None if it
    is not there whole."""
    try:
        if video_type == H264:
            unit = _nal_unit(elementary, lambda header: header & 0x1F == 7)
            return _h264_sps(_rbsp(unit[1:])) if unit else None
        if video_type == HEVC:
            unit = _nal_unit(elementary, lambda header: header >> 1 & 0x3F == 33)
            return _hevc_sps(_rbsp(unit[2:])) if unit else None
        if video_type in MPEG_VIDEO:
            return _mpeg_sequence(elementary)
    except _ShortData:  # a parameter set cut off at the end of what was gathered
        return None
    return None


def _nal_unit(data: bytes, wanted: Callable[[int], bool]) -> bytes:
    """The first NAL unit of the Annex B stream ``data`` whose first byte ``wanted`` takes."""
    at = data.find(b"\x00\x00\x01")
    while at != -1 and at + 3 < len(data):
        end = data.find(b"\x00\x00\x01", at + 3)
        if wanted(data[at + 3]):
            unit = data[at + 3 : end if end != -1 else len(data)]
            return unit.rstrip(b"\x00")  # a four-byte start code's zero belongs to the next
        at = end
    return b""


def _rbsp(unit: bytes) -> bytes:
    """A NAL unit's payload without its emulation-prevention bytes (00 00 03 -> 00 00)."""
    return unit.replace(b"\x00\x00\x03", b"\x00\x00")


def _h264_sps(rbsp: bytes) -> Picture:
    """ITU-T H.264 7.3.2.1.1, as far as the picture size."""
    bits = _Bits(rbsp)
    profile_idc, constraints = bits.u(8), bits.u(8)
    bits.u(8)  # level_idc
    bits.ue()  # seq_parameter_set_id
    chroma, frame_mbs_only = 1, 1
    if profile_idc in H264_CHROMA_PROFILES:
        chroma = bits.ue()
        if chroma == 3:
            bits.u(1)  # separate_colour_plane_flag
        bits.ue(), bits.ue()  # bit depths
        bits.u(1)  # qpprime_y_zero_transform_bypass_flag
        if bits.u(1):  # seq_scaling_matrix_present_flag
            for index in range(8 if chroma != 3 else 12):
                if bits.u(1):
                    _skip_scaling_list(bits, 16 if index < 6 else 64)
    bits.ue()  # log2_max_frame_num_minus4
    order_type = bits.ue()
    if order_type == 0:
        bits.ue()
    elif order_type == 1:
        bits.u(1)
        bits.se(), bits.se()
        for _ in range(bits.ue()):
            bits.se()
    bits.ue()  # max_num_ref_frames
    bits.u(1)  # gaps_in_frame_num_value_allowed_flag
    width_mbs, height_units = bits.ue() + 1, bits.ue() + 1
    frame_mbs_only = bits.u(1)
    if not frame_mbs_only:
        bits.u(1)  # mb_adaptive_frame_field_flag
    bits.u(1)  # direct_8x8_inference_flag
    width, height = width_mbs * 16, (2 - frame_mbs_only) * height_units * 16
    if bits.u(1):  # frame_cropping_flag
        left, right, top, bottom = bits.ue(), bits.ue(), bits.ue(), bits.ue()
        unit_x = 1 if chroma in (0, 3) else 2
        unit_y = (2 if chroma == 1 else 1) * (2 - frame_mbs_only)
        width -= unit_x * (left + right)
        height -= unit_y * (top + bottom)
    name = H264_PROFILES.get(profile_idc, f"profile {profile_idc}")
    if profile_idc == 66 and constraints & 0x40:  # constraint_set1_flag
        name = "Constrained Baseline"
    return Picture(name, width, height)


def _skip_scaling_list(bits: _Bits, size: int) -> None:
    last = following = 8
    for _ in range(size):
        if following:
            following = (last + bits.se() + 256) % 256
        last = following or last


def _hevc_sps(rbsp: bytes) -> Picture:
    """ITU-T H.265 7.3.2.2.1, as far as the picture size."""
    bits = _Bits(rbsp)
    bits.u(4)  # sps_video_parameter_set_id
    sub_layers = bits.u(3)  # sps_max_sub_layers_minus1
    bits.u(1)  # sps_temporal_id_nesting_flag
    bits.u(3)  # general_profile_space, general_tier_flag
    profile_idc = bits.u(5)
    bits.u(32)  # general_profile_compatibility_flag[32]
    bits.u(48)  # the source and constraint flags
    bits.u(8)  # general_level_idc
    present = [(bits.u(1), bits.u(1)) for _ in range(sub_layers)]
    if sub_layers:
        bits.u(2 * (8 - sub_layers))  # reserved_zero_2bits
    for profile_present, level_present in present:
        bits.u(88 if profile_present else 0)
        bits.u(8 if level_present else 0)
    bits.ue()  # sps_seq_parameter_set_id
    chroma = bits.ue()
    if chroma == 3:
        bits.u(1)  # separate_colour_plane_flag
    width, height = bits.ue(), bits.ue()
    if bits.u(1):  # conformance_window_flag
        left, right, top, bottom = bits.ue(), bits.ue(), bits.ue(), bits.ue()
        width -= (2 if chroma in (1, 2) else 1) * (left + right)
        height -= (2 if chroma == 1 else 1) * (top + bottom)
    return Picture(HEVC_PROFILES.get(profile_idc, f"profile {profile_idc}"), width, height)


def _mpeg_sequence(elementary: bytes) -> Picture | None:
    """An MPEG-1/2 sequence header's picture size (its profile is left out)."""
    at = elementary.find(b"\x00\x00\x01\xb3")
    if at == -1 or at + 7 > len(elementary):
        return None
    size = int.from_bytes(elementary[at + 4 : at + 7], "big")
    return Picture("", size >> 12, size & 0xFFF)


class _ShortData(Exception):
    pass


class _Bits:
    """Big-endian bits, and Exp-Golomb codes (ITU-T H.264 9.1)."""

    def __init__(self, data: bytes) -> None:
        self._value = int.from_bytes(data, "big")
        self._left = len(data) * 8

    def u(self, count: int) -> int:
        if count > self._left:
            raise _ShortData
        self._left -= count
        return self._value >> self._left & ((1 << count) - 1)

    def ue(self) -> int:
        zeros = 0
        while not self.u(1):
            zeros += 1
            if zeros > 31:
                raise _ShortData
        return (1 << zeros) - 1 + self.u(zeros)

    def se(self) -> int:
        code = self.ue()
        return (code + 1) // 2 if code % 2 else -(code // 2)
