"""The demo encoder, a live test pattern: real encoding, decoded back with PyAV."""

from __future__ import annotations

import io
import itertools
import os
import threading
import time

import av
import numpy as np
import pytest

# Imported as a module, which the pacing tests patch.
from channels_admin.streaming import pattern_encoder
from channels_admin.streaming.ts import TS_PACKET

SMALL = pattern_encoder.PatternOptions(width=320, height=180)
FPS = SMALL.fps
# At 320x180 the bars fill rows 0-107, the sweeping box 20 px wide runs in rows 109-122 and
# moves 6 px a frame (see _Painter); these numbers pin that layout down.
BAR_ROWS = slice(20, 90)
STRIP_ROWS = slice(112, 120)
BOX_WIDTH = 20
BOX_STEP = 6
COLOUR_TOLERANCE = 10


def stream(options: pattern_encoder.PatternOptions = SMALL, seconds: float = 2.0) -> list[bytes]:
    return list(pattern_encoder.pattern_chunks(options, realtime=False, max_seconds=seconds))


def decode_video(data: bytes) -> list[av.VideoFrame]:
    """Decode like a player joining anywhere: nothing is fed to the decoder before the first
    keyframe, because P-frames without their SPS/PPS are undecodable."""
    container = av.open(io.BytesIO(data), format="mpegts")
    frames: list[av.VideoFrame] = []
    started = False
    for packet in container.demux(video=0):
        started = started or packet.is_keyframe
        if started:
            frames.extend(packet.decode())
    container.close()
    return frames


def box_columns(frame: av.VideoFrame) -> tuple[int, int]:
    strip = frame.to_ndarray(format="rgb24")[STRIP_ROWS].mean(axis=(0, 2))
    lit = np.flatnonzero(strip > 128)
    return int(lit[0]), int(lit[-1])


def os_thread_count() -> int:
    # x264 and FFmpeg start native threads that threading.enumerate() cannot see.
    return len(os.listdir("/proc/self/task"))


def os_thread_count_settled(expected: int, timeout: float = 1.0) -> int:
    """The thread count once it reaches ``expected`` or ``timeout`` passes: a joined thread
    can stay listed in /proc for a moment after pthread_join() has returned."""
    deadline = time.monotonic() + timeout
    while os_thread_count() != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return os_thread_count()


def test_every_chunk_is_whole_ts_packets():
    chunks = stream()

    assert chunks
    assert [len(chunk) % TS_PACKET for chunk in chunks] == [0] * len(chunks)
    data = b"".join(chunks)
    sync_bytes = data[::TS_PACKET]
    assert sync_bytes == b"\x47" * (len(data) // TS_PACKET)


def test_stream_decodes_to_h264_frames_of_the_requested_size_with_aac_audio():
    data = b"".join(stream(seconds=2.0))

    container = av.open(io.BytesIO(data), format="mpegts")
    video = container.streams.video[0]
    audio_streams = list(container.streams.audio)
    assert video.codec_context.name == "h264"
    assert video.codec_context.profile == "Main"
    assert [s.codec_context.name for s in audio_streams] == ["aac"]
    assert audio_streams[0].codec_context.sample_rate == 48_000
    assert audio_streams[0].codec_context.layout.name == "mono"
    container.close()
    frames = decode_video(data)
    assert len(frames) == 2 * FPS
    assert {(frame.width, frame.height) for frame in frames} == {(320, 180)}
    keyframes = [index for index, frame in enumerate(frames) if frame.key_frame]
    assert keyframes == [0, FPS]


def test_stream_without_audio_has_only_video():
    options = pattern_encoder.PatternOptions(width=320, height=180, audio=False, fps=10)

    data = b"".join(stream(options, seconds=1.5))

    container = av.open(io.BytesIO(data), format="mpegts")
    assert [s.type for s in container.streams] == ["video"]
    container.close()
    assert len(decode_video(data)) == 15


def test_picture_moves_and_bars_have_their_colours():
    frames = decode_video(b"".join(stream(seconds=0.2)))

    first, second = frames[0], frames[1]
    assert box_columns(first) == (0, BOX_WIDTH - 1)
    assert box_columns(second) == (BOX_STEP, BOX_STEP + BOX_WIDTH - 1)
    pixels = first.to_ndarray(format="rgb24")
    bar_width = 320 / len(pattern_encoder.BAR_COLOURS_RGB)
    for bar, expected in enumerate(pattern_encoder.BAR_COLOURS_RGB):
        centre = int((bar + 0.5) * bar_width)
        patch = pixels[BAR_ROWS, centre - 8 : centre + 8].reshape(-1, 3).astype(int)
        error = np.abs(patch - np.array(expected)).max()
        assert error <= COLOUR_TOLERANCE, (bar, expected, patch.mean(axis=0))


def test_running_time_is_drawn_and_changes_every_frame():
    frames = decode_video(b"".join(stream(seconds=0.2)))

    # The band under the strip holds the label, the frame counter and the big timecode.
    bands = [frame.to_ndarray(format="gray")[126:] for frame in frames]
    assert all(band.max() > 200 for band in bands)
    changed = [
        int(np.count_nonzero(np.abs(a.astype(int) - b) > 64)) for a, b in itertools.pairwise(bands)
    ]
    assert min(changed) > 20


def test_client_joining_mid_stream_decodes_from_the_next_keyframe():
    chunks = stream(seconds=3.0)
    full = decode_video(b"".join(chunks))

    # A chunk follows each frame, so chunk 30 starts 1.2 s in, between keyframes 25 and 50.
    joined = decode_video(b"".join(chunks[30:]))

    assert len(joined) == FPS  # frames 50-74, from the keyframe at 2 s to the end
    assert joined[0].key_frame
    assert np.array_equal(
        joined[0].to_ndarray(format="rgb24"), full[2 * FPS].to_ndarray(format="rgb24")
    )


def test_realtime_output_follows_the_wall_clock():
    started = time.monotonic()
    chunks = list(pattern_encoder.pattern_chunks(SMALL, realtime=True, max_seconds=0.5))
    elapsed = time.monotonic() - started

    # 13 frames: the last is due 12/25 = 0.48 s after the first.
    assert len(decode_video(b"".join(chunks))) == 13
    assert 0.4 <= elapsed <= 1.0


class FakeClock:
    """Stands in for the time module inside pattern_encoder, so pacing is checked exactly."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def paced_chunk_times(
    monkeypatch: pytest.MonkeyPatch, stall_after: int, stall: float
) -> list[float]:
    clock = FakeClock()
    monkeypatch.setattr(pattern_encoder, "time", clock)
    options = pattern_encoder.PatternOptions(width=320, height=180, audio=False)
    times = []
    for index, _chunk in enumerate(pattern_encoder.pattern_chunks(options, max_seconds=2.0)):
        times.append(clock.now - 1000.0)
        if index == stall_after:
            clock.now += stall
    return times


def test_pacing_catches_up_a_short_stall_without_drifting(monkeypatch):
    times = paced_chunk_times(monkeypatch, stall_after=10, stall=0.5)

    # Without audio one chunk follows each frame, then the encoder flush adds none or one.
    assert times[:11] == pytest.approx([n / FPS for n in range(11)])
    # Frames 11-22 were already due when the consumer came back: sent without waiting...
    assert times[11:23] == pytest.approx([0.9] * 12)
    # ...and from then on the original schedule holds.
    assert times[23:50] == pytest.approx([n / FPS for n in range(23, 50)])


def test_pacing_starts_a_fresh_clock_after_a_long_stall(monkeypatch):
    times = paced_chunk_times(monkeypatch, stall_after=10, stall=3.0)

    assert times[:11] == pytest.approx([n / FPS for n in range(11)])
    # No burst of the three missed seconds: frame 11 goes at once, then one per 1/fps.
    assert times[11:50] == pytest.approx([3.4 + (n - 11) / FPS for n in range(11, 50)])


def test_closing_the_generator_early_releases_the_encoder():
    threads_before = os_thread_count()
    python_threads_before = threading.active_count()
    chunks = pattern_encoder.pattern_chunks(SMALL, realtime=False)

    first = next(chunks)
    chunks.close()

    assert len(first) % TS_PACKET == 0
    with pytest.raises(StopIteration):
        next(chunks)
    assert os_thread_count_settled(threads_before) == threads_before
    assert threading.active_count() == python_threads_before


def test_options_reject_sizes_that_4_2_0_cannot_encode():
    with pytest.raises(
        ValueError, match=r"^width and height must be even and at least 32, got 321x180$"
    ):
        pattern_encoder.PatternOptions(width=321, height=180)
