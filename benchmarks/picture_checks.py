"""Failover on what the picture shows (issue 51, item 4): how soon, and at what CPU cost; and
the CPU cost of the silent-audio check.

    .venv/bin/python benchmarks/picture_checks.py [--runs 3] [--frozen 20] [--black 10]
        [--interval 1] [--cost-seconds 20] [--silent 30] [--parts latency,cost,audio]
        [--kinds freeze,black,card,silent]

**latency**: a hub (no server: the hub alone, as ``tests/channels_admin/streaming``) plays a
channel of two sources from a real loopback origin (``loopback_fakes/media_upstream.py``: H.264
and AAC in MPEG-TS in real time, a key frame a second); once the primary has played a few
seconds its picture changes: it freezes (the last frame, still), goes black, or shows a still
card; or its sound goes silent (digital silence), the stream going on with fresh timestamps.
The silent-audio check is on (``--silent``) for every kind, so the picture kinds show too that
it does not fire on the clip's beep a second. Measured: from the first byte of the changed clip
leaving the origin to the backup's first picture going out to the viewers (the hub's report of
it), against the target of the configured seconds + 3 s.

**cost**: the share of a core the checks take per channel: the process's CPU time (every
thread: the decodes run in the pool) to feed a :class:`PictureWatch` the same ``--cost-seconds``
of a 720p and a 1080p H.264 stream (a moving picture with grain, 25 frames/s, a key frame every
second, encoded here first), checks on against checks off, divided by the stream's seconds; and the
median time of one key frame's decode and thumbnail.

**audio**: the same for the silent-audio check (:class:`AudioWatch`, ``--silent`` seconds): a
720p stream as above with programme-like sound (AAC-LC, stereo, 48 kHz, 128 kbit/s: noise
shaped like speech, its level swinging between -40 and -20 dBFS), where a run is decoded every
second; and with digital silence for its sound, where runs are decoded back to back (what the
check costs while a source is silent, until it fails). The median time of one run's decode.
"""

from __future__ import annotations

import argparse
import asyncio
import fractions
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import av  # noqa: E402
import numpy as np  # noqa: E402

from channels_admin.streaming.audio_watch import AudioChecks, AudioWatch, sample_level  # noqa: E402
from channels_admin.streaming.hub import Hub  # noqa: E402
from channels_admin.streaming.hub_events import HubEvent, HubReport  # noqa: E402
from channels_admin.streaming.picture_watch import (  # noqa: E402
    DECODERS,
    PictureChecks,
    PictureWatch,
    thumbnail,
)
from channels_admin.streaming.remux import MUX_OPTIONS, PacketSink  # noqa: E402
from channels_admin.streaming.sources import Upstream  # noqa: E402
from channels_admin.streaming.ts import TS_PACKET  # noqa: E402
from channels_admin.streaming.ts_scan import (  # noqa: E402
    ProgramScanner,
    packet_payload,
    pes_elementary,
    pid_rows,
)
from loopback_fakes.media_upstream import Behaviour, MediaUpstream  # noqa: E402

KINDS = {
    "freeze": Behaviour.FREEZE,
    "black": Behaviour.BLACK,
    "card": Behaviour.CARD,
    "silent": Behaviour.SILENT,
}
PLAYED_BEFORE_SEC = 4.0
FPS = 25
CHUNK = TS_PACKET * 7 * 50  # about what the hub's reader hands on at once


def configured_seconds(args: argparse.Namespace, kind: str) -> float:
    return {"black": args.black, "silent": args.silent}.get(kind, args.frozen)


def reason(kind: str, seconds: float) -> str:
    """What the primary must have failed for."""
    what = {"black": "black picture", "silent": "silent audio"}.get(kind, "frozen picture")
    return f"{what} for {seconds:g} s"


async def one_failover(
    origin: MediaUpstream, checks: PictureChecks, audio: AudioChecks, kind: str, run: int
) -> float:
    """Seconds from the clip's change to the backup's first picture."""
    primary, backup = f"/{kind}-{run}-a.ts", f"/{kind}-{run}-b.ts"
    backup_at: list[float] = []
    reasons: list[str] = []

    async def reported(report: HubReport) -> None:
        if report.event is HubEvent.DOWN:
            reasons.append(report.detail)
        if report.event is HubEvent.FLOWING and report.index == 1:
            backup_at.append(time.monotonic())

    hub = Hub(
        connect_timeout=5,
        stall_timeout=5,
        viewer_buffer_bytes=16 * 1024 * 1024,
        on_event=reported,
        picture_checks=checks,
        audio_checks=audio,
        # The origin paces a clip by its average byte rate, so a still clip's heavy first key
        # frames run its clock slow for a while: the pace check is not what is measured here.
        slow_window_seconds=60,
    )
    await hub.switch([Upstream(origin.url(primary)), Upstream(origin.url(backup))])
    try:
        await asyncio.sleep(PLAYED_BEFORE_SEC)
        if hub.playing_index != 0:
            raise RuntimeError("the primary does not play")
        origin.behave(primary, KINDS[kind])
        deadline = time.monotonic() + max(
            checks.frozen_seconds, checks.black_seconds, audio.silent_seconds
        )
        deadline += 30
        while not backup_at:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind}: no failover")
            await asyncio.sleep(0.01)
    finally:
        await hub.close()
    configured = {"black": checks.black_seconds, "silent": audio.silent_seconds}.get(
        kind, checks.frozen_seconds
    )
    expected = reason(kind, configured)
    if reasons != [expected]:
        raise RuntimeError(f"{kind}: the primary failed for {reasons}, not {expected!r}")
    return backup_at[0] - origin.changed[primary]


async def latency(args: argparse.Namespace) -> None:
    checks = PictureChecks(
        frozen_seconds=args.frozen, black_seconds=args.black, interval_seconds=args.interval
    )
    audio = AudioChecks(silent_seconds=args.silent, interval_seconds=args.interval)
    origin = MediaUpstream(clip_seconds=30.0)
    try:
        for kind in args.kinds.split(","):
            configured = configured_seconds(args, kind)
            times = [
                await one_failover(origin, checks, audio, kind, run) for run in range(args.runs)
            ]
            print(
                f"{kind}: configured {configured:g} s, change to the backup's first picture "
                f"median {statistics.median(times):.2f} s, worst {max(times):.2f} s "
                f"({', '.join(f'{t:.2f}' for t in times)}); target <= {configured + 3:g} s",
                flush=True,
            )
    finally:
        origin.close()


AUDIO_RATE = 48_000


def programme_sound(seconds: float, *, silent: bool) -> np.ndarray:
    """Stereo float samples: noise whose level swings between -40 and -20 dBFS RMS a few times
    a second (speech-like in its level, not its spectrum), or digital silence."""
    count = int(seconds * AUDIO_RATE)
    if silent:
        return np.zeros((2, count), np.float32)
    rng = np.random.default_rng(2)
    t = np.arange(count) / AUDIO_RATE
    level_db = -30 + 10 * np.sin(2 * np.pi * 3.1 * t)
    noise = rng.standard_normal((2, count)) * 10 ** (level_db / 20)
    return np.clip(noise, -1, 1).astype(np.float32)


def grainy_stream(width: int, height: int, seconds: float, *, sound: str | None = None) -> bytes:
    """H.264 in MPEG-TS: a gradient that drifts, with grain, so that key frames weigh what a
    broadcast's do (hundreds of kB at 1080p), not what a flat test pattern's do; with
    ``sound`` ("programme" or "silent", :func:`programme_sound`) AAC stereo beside it."""
    sink = PacketSink()
    container = av.open(sink, "w", format="mpegts", container_options=dict(MUX_OPTIONS))
    stream = container.add_stream(
        "libx264",
        rate=FPS,
        width=width,
        height=height,
        pix_fmt="yuv420p",
        bit_rate=width * height * 3,  # 6 Mbit/s at 1080p
        options={"preset": "ultrafast", "x264-params": f"keyint={FPS}:min-keyint={FPS}"},
    )
    stream.codec_context.time_base = fractions.Fraction(1, FPS)
    audio = (
        container.add_stream("aac", rate=AUDIO_RATE, layout="stereo", bit_rate=128_000)
        if sound
        else None
    )
    samples = programme_sound(seconds, silent=sound == "silent") if sound else None
    audio_sent = 0
    rng = np.random.default_rng(1)
    ys, xs = np.mgrid[0:height, 0:width]
    chunks = []
    for index in range(int(seconds * FPS)):
        luma = (xs + ys + 4 * index) % 220 + 16 + rng.integers(-10, 11, (height, width))
        planes = np.full((height * 3 // 2, width), 128, np.uint8)
        planes[:height] = np.clip(luma, 16, 235)
        frame = av.VideoFrame.from_ndarray(planes, format="yuv420p")
        frame.pts = index
        container.mux(stream.encode(frame))
        while audio is not None and samples is not None and audio_sent < (index + 1) * 1920:
            if audio_sent + 1024 > samples.shape[1]:
                break
            sound_frame = av.AudioFrame.from_ndarray(
                samples[:, audio_sent : audio_sent + 1024], format="fltp", layout="stereo"
            )
            sound_frame.sample_rate, sound_frame.pts = AUDIO_RATE, audio_sent
            container.mux(audio.encode(sound_frame))
            audio_sent += 1024
        chunks.append(sink.take())
    container.mux(stream.encode(None))
    if audio is not None:
        container.mux(audio.encode(None))
    container.close()
    chunks.append(sink.take())
    return b"".join(chunks)


def key_frames(data: bytes) -> list[bytes]:
    """The stream's key frames' access units, as the watch gathers them."""
    scanner = ProgramScanner()
    found = scanner.scan(data)
    starts = [start.row for start in found]
    keys = [start.row for start in found if start.key]
    units = []
    for key in keys:
        end = next((row for row in starts if row > key), len(data) // TS_PACKET)
        unit = bytearray()
        for row in range(key, end):
            packet = data[row * TS_PACKET : (row + 1) * TS_PACKET]
            if (packet[1] & 0x1F) << 8 | packet[2] != scanner.video_pid:
                continue
            payload = packet_payload(packet)
            if row == key:
                payload = payload[9 + payload[8] :]
            unit += payload
        units.append(bytes(unit))
    return units


def fed(data: bytes, checks: PictureChecks, seconds: float) -> tuple[float, int]:
    """CPU seconds (the process's, every thread) to feed a watch ``data``, on a clock of the
    stream's time (spread evenly over its bytes), and the pictures it judged."""
    now = [0.0]
    watch = PictureWatch(checks, clock=lambda: now[0])
    started = time.process_time()
    for at in range(0, len(data), CHUNK):
        now[0] = at / len(data) * seconds
        watch.feed(data[at : at + CHUNK])
        while watch.busy:  # as in real time, where a decode ends long before the next is due
            time.sleep(0.0005)
    watch.feed(b"")
    return time.process_time() - started, watch.pictures


def cost(args: argparse.Namespace) -> None:
    checks = PictureChecks(
        frozen_seconds=args.frozen, black_seconds=args.black, interval_seconds=args.interval
    )
    for width, height in ((1280, 720), (1920, 1080)):
        data = grainy_stream(width, height, args.cost_seconds)
        units = key_frames(data)
        decodes = []
        for unit in units:
            started = time.perf_counter()
            thumbnail(DECODERS[0x1B], unit)
            decodes.append(time.perf_counter() - started)
        on = off = 0.0
        pictures = 0
        for _ in range(3):  # interleaved, the least of three: the machine is shared
            cpu_off, _ = fed(data, PictureChecks(frozen_seconds=0, black_seconds=0), 0)
            cpu_on, pictures = fed(data, checks, args.cost_seconds)
            off = cpu_off if not off else min(off, cpu_off)
            on = cpu_on if not on else min(on, cpu_on)
        share = (on - off) / args.cost_seconds
        print(
            f"{width}x{height}: {len(data) * 8 / args.cost_seconds / 1e6:.1f} Mbit/s, key frames "
            f"{statistics.median(len(u) for u in units) / 1000:.0f} kB median; one decode and "
            f"thumbnail {statistics.median(decodes) * 1000:.1f} ms median "
            f"(worst {max(decodes) * 1000:.1f}); {pictures} pictures judged in "
            f"{args.cost_seconds:g} s (every {args.interval:g} s): CPU {on:.3f} s on, "
            f"{off:.3f} s off: **{share:.2%} of a core** per channel",
            flush=True,
        )


def audio_runs(data: bytes) -> list[bytes]:
    """Runs of the stream's audio elementary stream of about 0.3 s (15 AAC frames), as the
    watch gathers them."""
    scanner = ProgramScanner()
    scanner.scan(data)
    frames: list[bytearray] = []
    for row in pid_rows(data, scanner.audio_pid or -1):
        packet = data[row * TS_PACKET : (row + 1) * TS_PACKET]
        payload = packet_payload(packet)
        if packet[1] & 0x40:
            frames.append(bytearray(pes_elementary(payload) or b""))
        elif frames:
            frames[-1] += payload
    return [b"".join(frames[at : at + 15]) for at in range(0, len(frames) - 15, 15)]


def audio_fed(data: bytes, checks: AudioChecks, seconds: float) -> tuple[float, AudioWatch]:
    """CPU seconds (the process's, every thread) to feed an audio watch ``data``, on a clock of
    the stream's time (spread evenly over its bytes)."""
    now = [0.0]
    watch = AudioWatch(checks, clock=lambda: now[0])
    started = time.process_time()
    for at in range(0, len(data), CHUNK):
        now[0] = at / len(data) * seconds
        watch.feed(data[at : at + CHUNK])
        while watch.busy:
            time.sleep(0.0005)
    watch.feed(b"")
    return time.process_time() - started, watch


def audio_cost(args: argparse.Namespace) -> None:
    checks = AudioChecks(silent_seconds=args.silent)
    for sound in ("programme", "silent"):
        data = grainy_stream(1280, 720, args.cost_seconds, sound=sound)
        runs = audio_runs(data)
        decodes = []
        for run in runs:
            started = time.perf_counter()
            sample_level(0x0F, run)
            decodes.append(time.perf_counter() - started)
        on = off = 0.0
        for _ in range(3):  # interleaved, the least of three: the machine is shared
            cpu_off, _ = audio_fed(data, AudioChecks(silent_seconds=0), 0)
            cpu_on, watch = audio_fed(data, checks, args.cost_seconds)
            off = cpu_off if not off else min(off, cpu_off)
            on = cpu_on if not on else min(on, cpu_on)
        share = (on - off) / args.cost_seconds
        print(
            f"audio, {sound}: 1280x720 and AAC stereo 128 kbit/s, "
            f"{len(data) * 8 / args.cost_seconds / 1e6:.1f} Mbit/s; one 0.3 s run's decode and "
            f"level {statistics.median(decodes) * 1000:.2f} ms median "
            f"(worst {max(decodes) * 1000:.2f}); {watch.samples} runs judged in "
            f"{args.cost_seconds:g} s (failed: {watch.failed}); CPU {on:.3f} s on, {off:.3f} s "
            f"off: **{share:.2%} of a core** per channel",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--frozen", type=float, default=20.0)
    parser.add_argument("--black", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--cost-seconds", type=float, default=20.0)
    parser.add_argument("--silent", type=float, default=30.0)
    parser.add_argument("--parts", default="latency,cost,audio")
    parser.add_argument("--kinds", default=",".join(KINDS))
    args = parser.parse_args()
    parts = args.parts.split(",")
    if "cost" in parts:
        cost(args)
    if "audio" in parts:
        audio_cost(args)
    if "latency" in parts:
        asyncio.run(latency(args))


if __name__ == "__main__":
    main()
