"""The parts of failover on their own: the order sources are tried in and their backoffs, the
pace of a source by its own clock, and the gate that starts a source at a key frame."""

from __future__ import annotations

import io

import av
import pytest

from channels_admin.streaming.key_frame_gate import UNREADABLE_BYTES, KeyFrameGate
from channels_admin.streaming.pace import PaceMeter
from channels_admin.streaming.sources import STABLE_SECONDS, SourceCycle, source_label
from channels_admin.streaming.ts import TS_PACKET
from loopback_fakes.media_upstream import CLIP_PMT_PID, clip
from tests.timing import Clock


def pids(data: bytes) -> list[int]:
    return [(data[i + 1] & 0x1F) << 8 | data[i + 2] for i in range(0, len(data), TS_PACKET)]


def test_sources_are_labelled_by_their_place():
    assert [source_label(i, 3) for i in range(3)] == ["primary", "backup 2 of 3", "backup 3 of 3"]


def test_the_next_source_is_tried_at_once_and_a_failed_one_not_before_its_backoff():
    clock = Clock()
    cycle = SourceCycle(3, backoff_initial=1.0, backoff_max=4.0, clock=clock)

    assert cycle.next(None) == (0, 0.0)
    assert cycle.failed(0, played_seconds=0.0, connected_seconds=0.0) == 1.0
    assert cycle.next(0) == (1, 0.0)
    assert cycle.failed(1, played_seconds=0.0, connected_seconds=0.0) == 1.0
    assert cycle.next(1) == (2, 0.0)
    clock.now += 0.25
    assert cycle.failed(2, played_seconds=0.0, connected_seconds=0.0) == 1.0
    # every source backs off: the one whose backoff ends first, after the wait left of it
    assert cycle.next(2) == (0, 0.75)
    clock.now += 0.75
    assert cycle.next(2) == (0, 0.0)
    # backoffs double per failure, up to the cap
    assert [cycle.failed(0, played_seconds=1.0, connected_seconds=1.0) for _ in range(4)] == [
        2.0,
        4.0,
        4.0,
        4.0,
    ]


def test_a_source_that_played_for_long_backs_off_afresh_and_one_that_flaps_does_not():
    clock = Clock()
    cycle = SourceCycle(1, backoff_initial=0.5, backoff_max=10.0, clock=clock)
    for _ in range(3):
        cycle.failed(0, played_seconds=1.0, connected_seconds=1.0)

    # flapping: the backoff doubles, and counts from the connection's opening
    assert cycle.failed(0, played_seconds=1.0, connected_seconds=1.5) == 4.0
    assert cycle.next(0) == (0, 2.5)
    assert (
        cycle.failed(0, played_seconds=STABLE_SECONDS, connected_seconds=STABLE_SECONDS + 1) == 0.5
    )
    assert cycle.next(0) == (0, 0.0)  # it played longer than its backoff: at once
    assert cycle.failed(0, played_seconds=0.0, connected_seconds=0.0) == 1.0


def test_a_cycle_needs_a_source():
    with pytest.raises(ValueError, match="a channel has at least one source"):
        SourceCycle(0, backoff_initial=1.0, backoff_max=2.0)


def pcr_packet(pid: int, seconds: float) -> bytes:
    base = round(seconds * 90_000) % (1 << 33)
    pcr = bytes([base >> 25 & 0xFF, base >> 17 & 0xFF, base >> 9 & 0xFF, base >> 1 & 0xFF]) + bytes(
        [(base & 1) << 7 | 0x7E, 0]
    )
    adaptation = bytes([183, 0x10]) + pcr
    packet = bytes([0x47, pid >> 8 & 0x1F, pid & 0xFF, 0x20]) + adaptation
    return packet + b"\xff" * (TS_PACKET - len(packet))


def test_pace_is_the_stream_clock_against_the_wall_clock_over_the_window():
    clock = Clock()
    meter = PaceMeter(window_seconds=10.0, min_ratio=0.8, clock=clock)
    for second in range(11):  # real time: one stream second per wall second
        meter.feed(pcr_packet(0x100, 50.0 + second))
        clock.now += 1.0

    assert meter.ratio() == 1.0
    assert meter.slow() is False
    for second in range(10):  # then a tenth of real time
        meter.feed(pcr_packet(0x100, 60.0 + 0.1 * (second + 1)))
        clock.now += 1.0

    assert meter.ratio() == pytest.approx(0.1)
    assert meter.slow() is True


def test_pace_follows_one_pid_and_restarts_after_a_jump_of_the_clock():
    clock = Clock()
    meter = PaceMeter(window_seconds=4.0, clock=clock)
    for second in range(6):
        meter.feed(pcr_packet(0x100, 10.0 + second) + pcr_packet(0x200, 0.0))
        clock.now += 1.0
    assert meter.ratio() == 1.0

    meter.feed(pcr_packet(0x100, 3.0))  # backwards: a loop, a new encoder
    assert meter.ratio() is None
    for second in range(1, 5):
        clock.now += 1.0
        meter.feed(pcr_packet(0x100, 3.0 + 0.5 * second))
    assert meter.ratio() == 0.5


def test_a_stream_without_a_pcr_is_never_judged():
    clock = Clock()
    meter = PaceMeter(window_seconds=1.0, clock=clock)
    for _ in range(5):
        meter.feed(b"\x47\x01\x00\x10" + bytes(184))
        clock.now += 1.0

    assert (meter.ratio(), meter.slow()) == (None, False)


def key_frames(data: bytes) -> list[bool]:
    with av.open(io.BytesIO(data), format="mpegts") as container:
        return [packet.is_keyframe for packet in container.demux(video=0) if packet.size]


def test_the_gate_opens_at_the_first_key_frame_with_the_layout_in_front():
    stream = clip()
    middle = len(stream) // 2 // TS_PACKET * TS_PACKET  # somewhere inside a picture group
    gate = KeyFrameGate()

    step = 7 * TS_PACKET
    out = b"".join(
        gate.feed(stream[at : at + step]) for at in range(middle, middle + 99 * step, step)
    )

    assert gate.open is True
    assert pids(out)[:2] == [0, CLIP_PMT_PID]  # PAT, then the PMT
    # then the source as it came, from the key frame's packet on
    assert stream.index(out[2 * TS_PACKET :], middle) > middle
    frames = key_frames(out)
    assert frames[0] is True
    assert len(frames) > 10


def test_a_stream_the_gate_cannot_read_passes_whole_after_64_kib():
    packets = [b"\x47\x01\x00\x10" + bytes([n % 256]) * 184 for n in range(400)]
    gate = KeyFrameGate()
    outs = [gate.feed(packet) for packet in packets]

    opened = next(n for n, out in enumerate(outs) if out)
    assert opened == UNREADABLE_BYTES // TS_PACKET
    assert outs[opened] == b"".join(packets[: opened + 1])
    assert b"".join(outs) == b"".join(packets)
