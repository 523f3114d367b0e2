"""The server's memory while many uploads arrive at once (issue 36, finding 3).

    .venv/bin/python benchmarks/upload_memory.py [--uploads 16] [--frames 240] [--runs 1]
        [--env MAX_PARALLEL_TRANSCODES=8 ...]

Runs the real server (default settings) and writes two black H.264 files like the finding's:
7680x4320 (8K) and 4096x2160 (4K, the largest picture ``MAX_UPLOAD_PIXELS`` takes), ``--frames``
frames at 24 fps. For each, ``--runs`` times on the same server, ``--uploads`` copies are sent
at once (``uploadVideo``, each its own client address so that the per-client upload limit is
not what answers), while the server process's resident memory is sampled from /proc every
50 ms. Prints the baseline before, the peak, what is left ``--settle`` seconds after the last
answer, and the answers by code. ``--env`` sets the server's settings (by default, the
defaults).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import threading
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import av  # noqa: E402
import numpy as np  # noqa: E402
import requests  # noqa: E402

from benchmarks.local_server import served  # noqa: E402

UPLOAD = "mutation($file: Upload!) { uploadVideo(file: $file) { path } }"


def black_video(path: Path, *, width: int, height: int, frames: int, fps: int = 24) -> Path:
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast"}
        black = av.VideoFrame.from_ndarray(np.zeros((height, width, 3), np.uint8), format="rgb24")
        for index in range(frames):
            black.pts, black.time_base = index, Fraction(1, fps)
            for packet in stream.encode(black):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def send(base_url: str, content: bytes, number: int, answers: list) -> None:
    operations = {"query": UPLOAD, "variables": {"file": None}}
    started = time.perf_counter()
    response = requests.post(
        f"{base_url}/graphql",
        files={
            "operations": (None, json.dumps(operations)),
            "map": (None, json.dumps({"1": ["variables.file"]})),
            "1": ("clip.mp4", content, "video/mp4"),
        },
        headers={"X-Forwarded-For": f"198.51.100.{number + 1}"},
        timeout=900,
    )
    body = response.json()
    code = body["errors"][0]["extensions"]["code"] if "errors" in body else "stored"
    answers.append((code, time.perf_counter() - started))


def crowd(server, content: bytes, uploads: int, settle: float) -> dict:
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append(server.rss_mb())
            time.sleep(0.05)

    baseline = server.rss_mb()
    sampler = threading.Thread(target=sample)
    sampler.start()
    answers: list[tuple[str, float]] = []
    senders = [
        threading.Thread(target=send, args=(server.base_url, content, n, answers))
        for n in range(uploads)
    ]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    time.sleep(settle)
    done.set()
    sampler.join()
    peak, after = max(samples), server.rss_mb()
    return {"baseline": baseline, "peak": peak, "after": after, "answers": answers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, default=16)
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--settle", type=float, default=5, help="seconds after the last answer")
    parser.add_argument("--runs", type=int, default=1, help="crowds of each file, one by one")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server")
    options = parser.parse_args()
    settings = dict(setting.split("=", 1) for setting in options.env)
    with tempfile.TemporaryDirectory() as work, served(**settings) as server:
        for name, (width, height) in {"8K": (7680, 4320), "4K": (4096, 2160)}.items():
            path = black_video(
                Path(work) / f"{name}.mp4", width=width, height=height, frames=options.frames
            )
            content = path.read_bytes()
            for _ in range(options.runs):
                result = crowd(server, content, options.uploads, options.settle)
                codes = collections.Counter(code for code, _ in result["answers"])
                slowest = max(took for _, took in result["answers"])
                print(
                    f"{name} ({len(content) / 1024:.0f} KB, {options.frames} frames) x"
                    f"{options.uploads}: RSS baseline {result['baseline']:.0f} MB, peak "
                    f"{result['peak']:.0f} MB, {options.settle:g} s after "
                    f"{result['after']:.0f} MB; answers {dict(codes)}, the last after "
                    f"{slowest:.1f} s",
                    flush=True,
                )


if __name__ == "__main__":
    main()
