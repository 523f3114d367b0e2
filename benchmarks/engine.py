"""Speed and memory of a segmentation engine on a 10 s, 24 fps, 854 x 480 video.

    .venv/bin/python benchmarks/engine.py [--engine classic] [--objects 1] [--rounds 3]

Makes the video (textured shapes moving over a textured background, written as H.264 with
PyAV), then for each round opens a session on the file as the server would: decodes frames on
demand, answers three clicks per object on frame 0 (the evaluation's simulated user) and
propagates through all 240 frames. Prints the medians over rounds of the time per click and the
propagation speed per object, and the process's peak memory (everything: Python, libraries,
frame cache and engine state) against what it held before the first session.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import av  # noqa: E402
import cv2  # noqa: E402
import numpy as np  # noqa: E402

from segmentation.engines import engine_create  # noqa: E402
from segmentation.engines.frames import VideoFileFrames  # noqa: E402
from segmentation.evaluation.runner import clicks_simulate  # noqa: E402

WIDTH, HEIGHT, FPS, SECONDS = 854, 480, 24, 10
COLOURS = [(200, 50, 40), (40, 90, 210), (230, 200, 40), (60, 170, 80)]


def scene(index: int, objects: int) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Frame ``index`` (RGB) and its true masks."""
    random = np.random.default_rng(3)
    ys, xs = np.mgrid[:HEIGHT, :WIDTH]
    background = np.stack([40 + 80 * xs / WIDTH, 90 + 60 * ys / HEIGHT, 100 + 0 * xs], axis=-1)
    image = np.clip(background + random.normal(0, 8, background.shape), 0, 255)
    texture = random.normal(0, 12, (HEIGHT, WIDTH, 3))
    masks: dict[int, np.ndarray] = {}
    for number in range(objects):
        phase = index / (FPS * SECONDS) * 2 * np.pi + number * np.pi / 2
        x = WIDTH / 2 + (WIDTH / 3) * np.cos(phase) * (1 - 0.2 * number)
        y = HEIGHT / 2 + (HEIGHT / 4) * np.sin(phase)
        radius = 60 + 15 * np.sin(phase * 3)
        mask = ((xs - x) / 1.3) ** 2 + (ys - y) ** 2 <= radius**2
        shifted = np.roll(texture, (int(y), int(x)), axis=(0, 1))
        image[mask] = np.array(COLOURS[number % len(COLOURS)]) + shifted[mask]
        for earlier in masks.values():
            earlier &= ~mask
        masks[number + 1] = mask
    return np.clip(image, 0, 255).astype(np.uint8), masks


def make_video(path: Path, objects: int) -> None:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.options = {"crf": "20"}
        for index in range(FPS * SECONDS):
            image, _ = scene(index, objects)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, "rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def session(engine, path: Path, truth: dict[int, np.ndarray]) -> tuple[list[float], float]:
    """One session: 3 clicks per object, then the whole propagation; (click seconds, fps/object)."""
    # The frame cache a server session has (SESSION_FRAME_CACHE_MB's default).
    frames = VideoFileFrames(path, cache_bytes=64 * 1024 * 1024)
    state = engine.open(frames)
    click_seconds = clicks_simulate(state, truth, clicks=3)
    started = time.perf_counter()
    count = sum(1 for _ in state.propagate(start_frame_index=0))
    elapsed = time.perf_counter() - started
    state.close()
    frames.close()
    return click_seconds, count * len(truth) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="classic")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--objects", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--make", type=Path, help=argparse.SUPPRESS)  # the video-making child
    args = parser.parse_args()
    if args.make:
        make_video(args.make, args.objects)
        return
    options = dict(item.split("=", 1) for item in args.option)
    cv2.setNumThreads(cv2.getNumThreads())
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "video.mp4"
        # Made in a child process, so its memory does not count here.
        subprocess.run(  # noqa: S603 (this script, with our own interpreter)
            [sys.executable, __file__, "--make", str(path), "--objects", str(args.objects)],
            check=True,
        )
        truth = scene(0, args.objects)[1]
        engine = engine_create(args.engine, options)
        baseline = peak_rss_mb()
        print(
            f"{args.engine}: {WIDTH}x{HEIGHT}, {FPS} fps, {SECONDS} s ({FPS * SECONDS} frames), "
            f"{args.objects} object(s); before the first session: {baseline:.0f} MB",
            flush=True,
        )
        clicks, speeds = [], []
        for round_ in range(1, args.rounds + 1):
            seconds, fps = session(engine, path, truth)
            clicks += seconds
            speeds.append(fps)
            print(
                f"  round {round_}: click median {statistics.median(seconds) * 1000:.0f} ms "
                f"(first {seconds[0] * 1000:.0f} ms), propagation {fps:.1f} frames/s per object, "
                f"peak memory {peak_rss_mb():.0f} MB",
                flush=True,
            )
    print(
        f"median click {statistics.median(clicks) * 1000:.0f} ms; "
        f"median propagation {statistics.median(speeds):.1f} frames/s per object; "
        f"peak memory {peak_rss_mb():.0f} MB (process total), "
        f"{peak_rss_mb() - baseline:.0f} MB above the process before its first session"
    )


if __name__ == "__main__":
    main()
