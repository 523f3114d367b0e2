"""What a stream is, read from its packets: the codecs from the PMT, the profile and the picture
size from each key frame's parameter set, in real streams encoded by the test."""

from __future__ import annotations

import dataclasses
import io

import av
import numpy as np
import pytest

from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks
from channels_admin.streaming.slate import SLATE_OPTIONS
from channels_admin.streaming.stream_format import FormatWatch
from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import private_audio_type


def told(watch: FormatWatch, data: bytes, chunk_packets: int = 50) -> list[str]:
    """What ``watch`` tells, fed ``data`` in chunks."""
    size = chunk_packets * TS_PACKET
    chunks = (data[at : at + size] for at in range(0, len(data), size))
    return [text for chunk in chunks if (text := watch.feed(chunk)) is not None]


def pattern(
    seconds: float = 1.0, options: PatternOptions | None = None, **changes: object
) -> bytes:
    """``seconds`` of the demo pattern with ``options`` (the defaults) and ``changes``."""
    options = dataclasses.replace(options or PatternOptions(), **changes)
    return b"".join(pattern_chunks(options, realtime=False, max_seconds=seconds))


def encoded(codec: str, width: int, height: int, options: dict[str, str] | None = None) -> bytes:
    """Ten grey frames of ``codec`` in MPEG-TS, without sound."""
    out = io.BytesIO()
    with av.open(out, "w", format="mpegts") as container:
        stream = container.add_stream(
            codec, rate=25, width=width, height=height, options=options or {}
        )
        stream.pix_fmt = "yuv420p"
        for index in range(10):
            picture = np.full((height * 3 // 2, width), 16 + index * 8, np.uint8)
            frame = av.VideoFrame.from_ndarray(picture, format="yuv420p")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return out.getvalue()


def test_the_slate_and_the_source_of_issue_48_differ_in_their_profile_alone():
    slate = pattern(options=SLATE_OPTIONS)
    source = pattern(profile="baseline", audio=False)

    assert told(FormatWatch(), slate) == ["H.264 Main 640x360, AAC"]
    assert told(FormatWatch(), source) == ["H.264 Constrained Baseline 640x360"]


@pytest.mark.parametrize(
    ("codec", "width", "height", "options", "expected"),
    [
        ("libx264", 1920, 1080, {"profile": "high"}, "H.264 High 1920x1080"),  # cropped from 1088
        ("libx265", 640, 360, {"x265-params": "log-level=error"}, "HEVC Main 640x360"),
        ("mpeg2video", 720, 576, {}, "MPEG-2 video 720x576"),
    ],
)
def test_the_codec_profile_and_size_come_from_the_key_frames(
    codec, width, height, options, expected
):
    assert told(FormatWatch(), encoded(codec, width, height, options)) == [expected]


def test_a_change_within_the_stream_is_told_and_nothing_else():
    watch = FormatWatch()

    first = told(watch, pattern(seconds=2, width=320, height=180))
    same = told(watch, pattern(seconds=2, width=320, height=180))
    changed = told(watch, pattern(seconds=2, width=640, height=360))

    assert (first, same, changed) == (
        ["H.264 Main 320x180, AAC"],
        [],
        ["H.264 Main 640x360, AAC"],
    )


def test_a_restart_reads_the_next_stream_afresh():
    watch = FormatWatch()
    told(watch, pattern(width=320, height=180))

    watch.restart()

    assert watch.format is None
    assert told(watch, pattern(width=320, height=180)) == ["H.264 Main 320x180, AAC"]


def test_a_stream_whose_format_cannot_be_read_is_told_as_far_as_known_after_a_mebibyte():
    # null packets: no PAT, no PMT
    nulls = (b"\x47\x1f\xff\x10" + b"\xff" * (TS_PACKET - 4)) * (1024 * 1024 // TS_PACKET + 1)
    watch = FormatWatch()

    assert told(watch, nulls[: 512 * 1024 // TS_PACKET * TS_PACKET]) == []
    assert told(watch, nulls) == [""]


@pytest.mark.parametrize(
    ("descriptors", "expected"),
    [
        (bytes([0x6A, 0x01, 0x00]), 0x81),  # DVB's AC-3 descriptor
        (bytes([0x7A, 0x01, 0x00]), 0x87),  # DVB's enhanced AC-3 descriptor
        (bytes([0x05, 0x04]) + b"AC-3", 0x81),  # a registration alone names the format
        (bytes([0x05, 0x04]) + b"EAC3" + bytes([0x0A, 0x04]) + b"eng\x00", 0x87),
        (bytes([0x0A, 0x04]) + b"eng\x00" + bytes([0x6A, 0x01, 0x00]), 0x81),  # after a language
        (bytes([0x59, 0x08]) + b"eng\x10\x00\x01\x00\x01", None),  # DVB subtitles
        (bytes([0x56, 0x05]) + b"eng\x09\x00", None),  # teletext
        (bytes([0x05, 0x04]) + b"KLVA", None),  # a registration of another format
        (b"", None),
        (bytes([0x6A]), None),  # cut short: no length
    ],
)
def test_private_data_is_audio_where_its_descriptors_name_ac3_or_eac3(descriptors, expected):
    assert private_audio_type(descriptors) == expected
