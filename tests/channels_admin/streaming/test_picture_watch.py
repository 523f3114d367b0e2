"""The picture checks on their own: real H.264 in MPEG-TS from the demo encoder (moving, still,
black), fed a frame at a time on a clock of the stream's own time, so that which key frame
failed a source, and when, is exact. Each key frame's decode is waited for before the next
chunk, as a chunk a frame long would be on the wire."""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest

from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks
from channels_admin.streaming.picture_watch import (
    UNIT_MAX_BYTES,
    PictureChecks,
    PictureWatch,
)
from channels_admin.streaming.ts import TS_PACKET

FPS = 25
OPTIONS = PatternOptions(width=320, height=180, fps=FPS, video_bitrate=400_000, audio=False)


@functools.cache
def frames(picture: str, seconds: float = 6.0) -> tuple[bytes, ...]:
    """The stream, one chunk per encoded frame (the muxer's first may hold the layout)."""
    options = PatternOptions(**{**OPTIONS.__dict__, "picture": picture})
    return tuple(pattern_chunks(options, realtime=False, max_seconds=seconds))


class Run:
    """A watch fed ``chunks``, the clock at chunk N being N frames."""

    def __init__(self, checks: PictureChecks) -> None:
        self.now = 0.0
        self.watch = PictureWatch(checks, clock=lambda: self.now)
        self.failed_at: float | None = None

    def feed(self, chunks: tuple[bytes, ...]) -> Run:
        for index, chunk in enumerate(chunks):
            self.now = index / FPS
            self.watch.feed(chunk)
            settled(self.watch)
            if self.watch.failed is not None:
                self.failed_at = self.now
                break
        return self


def settled(watch: PictureWatch, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while watch.busy:
        assert time.monotonic() < deadline, "a decode did not end"
        time.sleep(0.001)


def test_a_moving_picture_is_never_failed_and_each_due_key_frame_is_judged():
    run = Run(PictureChecks(frozen_seconds=2, black_seconds=2, interval_seconds=1)).feed(
        frames("moving")
    )

    assert run.watch.failed is None
    assert run.watch.pictures == 6  # the key frames at 0, 1, ... 5 s


def test_a_still_picture_fails_as_frozen_once_alike_for_the_frozen_seconds():
    run = Run(PictureChecks(frozen_seconds=2, black_seconds=2, interval_seconds=1)).feed(
        frames("still")
    )

    assert run.watch.failed == "frozen picture for 2 s"
    assert run.watch.pictures == 3  # at 0 s (the run's first), 1 s, and 2 s: two seconds alike
    assert run.failed_at == pytest.approx(2 + 2 / FPS)  # the key frame at 2 s, whole and decoded


def test_a_black_picture_fails_as_black_and_not_as_frozen():
    run = Run(PictureChecks(frozen_seconds=1, black_seconds=3, interval_seconds=1)).feed(
        frames("black")
    )

    assert run.watch.failed == "black picture for 3 s"
    assert run.watch.pictures == 4


def test_each_check_is_off_at_zero():
    black = Run(PictureChecks(frozen_seconds=1, black_seconds=0, interval_seconds=1))
    still = Run(PictureChecks(frozen_seconds=0, black_seconds=1, interval_seconds=1))

    black.feed(frames("black"))
    still.feed(frames("still"))

    assert (black.watch.failed, black.watch.pictures) == (None, 6)
    assert (still.watch.failed, still.watch.pictures) == (None, 6)


def test_both_off_decode_nothing():
    run = Run(PictureChecks(frozen_seconds=0, black_seconds=0)).feed(frames("still"))

    assert (run.watch.failed, run.watch.pictures) == (None, 0)


def test_key_frames_are_taken_no_more_often_than_the_interval():
    run = Run(PictureChecks(frozen_seconds=2, black_seconds=2, interval_seconds=2)).feed(
        frames("moving")
    )

    assert run.watch.pictures == 3  # at 0, 2 and 4 s; the others are not decoded


def test_once_a_verdict_is_due_the_next_key_frame_decides_it_whatever_the_interval():
    run = Run(PictureChecks(frozen_seconds=2, black_seconds=2, interval_seconds=3)).feed(
        frames("still")
    )

    # the key frames at 0 s and, the frozen seconds over, at 2 s: not the one due at 3 s
    assert (run.watch.failed, run.watch.pictures) == ("frozen picture for 2 s", 2)
    assert run.failed_at == pytest.approx(2 + 2 / FPS)


def test_a_picture_that_changed_starts_the_frozen_time_afresh():
    # given 37 frames of a moving picture (key frames at frames 0 and 25), then a still one
    # (key frames at frames 37, 62, 87, 112)
    chunks = frames("moving")[:37] + frames("still")
    run = Run(PictureChecks(frozen_seconds=2, black_seconds=2, interval_seconds=1))

    run.feed(chunks)

    # due again at frame 50: the still picture's key frame at frame 62 is the run's first,
    # and the one at 112 two seconds on fails it, seen two frames later
    assert run.watch.failed == "frozen picture for 2 s"
    assert run.watch.pictures == 5
    assert run.failed_at == pytest.approx(114 / FPS)


def layout_and_key_frame_start() -> tuple[bytes, bytes]:
    """The encoder's PAT and PMT, and the first packet of its first key frame's PES."""
    first = frames("moving")[0]
    packets = [first[at : at + TS_PACKET] for at in range(0, len(first), TS_PACKET)]
    layout = b"".join(p for p in packets if (p[1] & 0x1F) << 8 | p[2] in (0, 0x1000))
    video = next(p for p in packets if (p[1] & 0x1F) << 8 | p[2] == 0x100 and p[1] & 0x40)
    return layout, video


def video_packets(payload: bytes, *, start: bool = False) -> bytes:
    """``payload`` in packets of the encoder's video PID (0x100)."""
    out = bytearray()
    for at in range(0, len(payload), TS_PACKET - 4):
        flags = 0x41 if start and at == 0 else 0x01
        out += bytes([0x47, flags, 0x00, 0x10]) + payload[at : at + TS_PACKET - 4].ljust(
            184, b"\xff"
        )
    return bytes(out)


def test_a_key_frame_larger_than_the_cap_is_neither_held_nor_decoded():
    # given a key frame that never ends: 9 MiB after its start, no next PES
    layout, start = layout_and_key_frame_start()
    run = Run(PictureChecks(frozen_seconds=1, black_seconds=1, interval_seconds=1))
    flood = video_packets(bytes(1024 * 1024))

    run.watch.feed(layout + start)
    sent = 0
    while sent <= UNIT_MAX_BYTES:
        run.watch.feed(flood)
        sent += len(flood)
    held = run.watch.held_bytes
    run.watch.feed(video_packets(b"\x00\x00\x01\xe0" + bytes(20), start=True))  # the next PES
    settled(run.watch)
    run.watch.feed(b"")

    assert held == 0
    assert (run.watch.decodes, run.watch.pictures, run.watch.failed) == (0, 0, None)


def test_a_key_frame_that_does_not_decode_judges_nothing():
    # given an IDR slice of random bytes, without the parameter sets it needs
    layout, _ = layout_and_key_frame_start()
    garbage = np.random.default_rng(7).integers(0, 256, 20_000, dtype=np.uint8).tobytes()
    pes = b"\x00\x00\x01\xe0\x00\x00\x80\x80\x05\x21\x00\x01\x00\x01"
    run = Run(PictureChecks(frozen_seconds=1, black_seconds=1, interval_seconds=1))

    run.watch.feed(layout + video_packets(pes + b"\x00\x00\x00\x01\x65" + garbage, start=True))
    run.watch.feed(video_packets(b"\x00\x00\x01\xe0" + bytes(20), start=True))
    settled(run.watch)
    run.watch.feed(b"")

    assert (run.watch.decodes, run.watch.pictures, run.watch.failed) == (1, 0, None)
