"""Propagation speed and memory of the ``sam2`` engine.

    .venv/bin/python benchmarks/sam2_speed.py --size tiny --frames 32 [--checkpoint FILE]
        [--device auto] [--objects 1] [--compile] [--width 1280 --height 720]

Without ``--checkpoint`` the model of ``--size`` gets random weights: speed and memory do not
depend on the weights' values. Frames are drawn in memory (moving discs on a gradient) and served
through a frame source like a decoded video. Prints the click time, propagation frames/s (median
per-frame time, the first three frames left out as warm-up), the process's peak RSS and, on
CUDA, the peak device memory, and what the memory bank holds per frame and object (what grows
with the video's length).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from segmentation.engines.frames import FrameSource
from segmentation.engines.sam2.checkpoint import checkpoint_save
from segmentation.engines.sam2.config import size_config
from segmentation.engines.sam2.engine import Sam2Engine, Sam2Options
from segmentation.engines.sam2.model import Sam2Model


class DrawnFrames(FrameSource):
    """Discs moving over a gradient, drawn on demand."""

    def __init__(self, count: int, width: int, height: int) -> None:
        super().__init__()
        self.count, self.width, self.height, self.fps = count, width, height, 24.0
        ys, xs = np.mgrid[:height, :width]
        self._ys, self._xs = ys, xs
        self._background = np.stack(
            [60 + 80 * xs / width, 90 + 60 * ys / height, np.full(xs.shape, 110.0)], axis=-1
        ).astype(np.uint8)

    def __len__(self) -> int:
        return self.count

    def _decode(self, index: int) -> np.ndarray:
        image = self._background.copy()
        for k, colour in enumerate([(220, 40, 40), (40, 200, 60), (50, 80, 230)]):
            cx = self.width * (0.25 + 0.25 * k) + 3 * index
            cy = self.height * 0.5 + 2 * index * (-1) ** k
            inside = (self._xs - cx) ** 2 + (self._ys - cy) ** 2 < (self.height * 0.12) ** 2
            image[inside] = colour
        return self._keep(index, image)


def _bank_mb(state) -> float:
    """What the memory bank holds: the tensors of every object's prompted and tracked frames."""
    total = 0
    for track in state.tracker.tracks.values():
        for output in [*track.prompted.values(), *track.tracked.values()]:
            tensors = [output.mask_logits, output.pointer, output.score, output.memory]
            total += sum(t.nbytes for t in tensors if t is not None)
    return total / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--objects", type=int, default=1, choices=[1, 2, 3])
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        checkpoint = args.checkpoint
        if checkpoint is None:
            checkpoint = Path(folder) / "random.pt"
            checkpoint_save(Sam2Model(size_config(args.size)), checkpoint)
        options = Sam2Options(checkpoint=str(checkpoint), device=args.device, compile=args.compile)
        engine = Sam2Engine(options)
    frames = DrawnFrames(args.frames, args.width, args.height)
    state = engine.open(frames)
    click_started = time.perf_counter()
    for k in range(args.objects):
        state.add_points(
            frame_index=0, object_id=k + 1, points=[[0.25 + 0.25 * k, 0.5]], labels=[1]
        )
    click_sec = time.perf_counter() - click_started
    times, last = [], time.perf_counter()
    for _ in state.propagate(start_frame_index=0):
        now = time.perf_counter()
        times.append(now - last)
        last = now
    steady = times[3:] or times
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"model {engine.model.config.version} {args.size}, device {engine.device}, "
        f"{args.width}x{args.height}, {args.frames} frames, {args.objects} object(s)"
    )
    print(f"first click(s): {click_sec * 1000:.0f} ms")
    print(f"propagation: {1 / statistics.median(steady):.2f} frames/s (median of {len(steady)})")
    print(f"peak RSS: {peak_rss_mb:.0f} MB")
    frames_held = args.frames * args.objects
    print(f"memory bank: {_bank_mb(state) / frames_held:.2f} MB per frame and object")
    if engine.device.type == "cuda":
        print(f"peak CUDA memory: {torch.cuda.max_memory_allocated() / 2**20:.0f} MB")
    state.close()


if __name__ == "__main__":
    main()
