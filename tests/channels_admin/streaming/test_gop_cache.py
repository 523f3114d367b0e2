"""The GOP cache (channels_admin/streaming/gop_cache.py) on real MPEG-TS: H.264 from the demo
encoder and HEVC from PyAV, fed in the chunks the hub relays."""

from __future__ import annotations

import io
from fractions import Fraction

import av
import numpy as np

from channels_admin.streaming.gop_cache import GopCache
from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks

OPTIONS = PatternOptions(width=160, height=96, fps=10, gop_seconds=2.0)


def pattern(seconds: float) -> list[bytes]:
    return list(pattern_chunks(OPTIONS, realtime=False, max_seconds=seconds))


def decoded(data: bytes) -> list[av.VideoFrame]:
    with av.open(io.BytesIO(data), format="mpegts") as container:
        return list(container.decode(video=0))


def fed(chunks: list[bytes], **limits) -> GopCache:
    cache = GopCache(**({"max_bytes": 1 << 22, "max_seconds": 60.0} | limits))
    for chunk in chunks:
        cache.feed(chunk)
    return cache


def test_a_new_viewer_starts_at_the_last_key_frame():
    chunks = pattern(3.5)  # 10 frames/s, a key frame every 2 s: the last one is frame 20
    whole = [frame.pts for frame in decoded(b"".join(chunks))]

    frames = decoded(fed(chunks).start())

    assert frames[0].key_frame
    assert [frame.pts for frame in frames] == whole[20:]
    assert len(whole) == 35


def test_the_start_is_pat_then_pmt_then_the_group():
    start = fed(pattern(2.5)).start()

    pids = [(start[i + 1] & 0x1F) << 8 | start[i + 2] for i in range(0, 3 * 188, 188)]
    assert pids[:2] == [0, 0x1000]  # FFmpeg's PMT PID
    assert start[2 * 188 + 3] & 0x20  # an adaptation field...
    assert start[2 * 188 + 5] & 0x40  # ...that says: random access


def test_nothing_is_offered_before_the_first_key_frame_or_after_a_clear():
    chunks = pattern(1.0)
    cache = GopCache(max_bytes=1 << 22, max_seconds=60.0)
    assert cache.start() == b""
    cache.feed(chunks[0][:188])  # the PAT alone
    assert cache.start() == b""
    for chunk in chunks:
        cache.feed(chunk)
    assert cache.start() != b""

    cache.clear()

    assert cache.start() == b""


def test_a_group_larger_than_the_limit_is_given_up_until_the_next_key_frame():
    chunks = pattern(3.5)
    total = sum(len(c) for c in chunks)

    assert fed(chunks, max_bytes=total // 10).start() == b""
    assert fed(chunks, max_bytes=0).start() == b""  # the cache is off


def test_hevc_key_frames_are_found_without_the_random_access_flag():
    output_buffer = io.BytesIO()
    with av.open(output_buffer, "w", format="mpegts") as output:
        stream = output.add_stream(
            "libx265", rate=10, options={"x265-params": "keyint=10:min-keyint=10:log-level=none"}
        )
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for index in range(25):
            frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), index * 9, np.uint8), "rgb24")
            frame.pts, frame.time_base = index, Fraction(1, 10)
            output.mux(stream.encode(frame))
        output.mux(stream.encode(None))
    data = output_buffer.getvalue()
    # clear every adaptation field's random-access indicator: only the NAL types tell
    packets = bytearray(data)
    for at in range(0, len(packets), 188):
        if packets[at + 3] & 0x20 and packets[at + 4]:
            packets[at + 5] &= ~0x40
    frames = decoded(
        fed([bytes(packets[i : i + 1880]) for i in range(0, len(packets), 1880)]).start()
    )

    assert frames[0].key_frame
    assert len(frames) == 5  # frames 20-24
