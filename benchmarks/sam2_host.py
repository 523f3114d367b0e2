"""What the ``sam2`` engine's launching thread does per tracked frame besides the model's work.

    .venv/bin/python benchmarks/sam2_host.py [--size tiny] [--objects 1,3] [--frames 8]
        [--width 1280 --height 720] [--device auto] [--official]

A GPU runs kernels asynchronously: what bounds a small model there is the thread that launches
them, and every millisecond that thread spends on anything else delays the next frame's
kernels (issue 30). This times, on that thread, each tracked frame of a propagation and the
parts of it:

- ``frame in``: waiting for the frame's input, decoded and preprocessed in a background
  thread (or preparing it here, when it was not ahead);
- ``model``: the model's own calls (image encoder, memory attention and the mask decoder,
  memory encoder), which on a GPU is their launching only;
- ``holes``: filling small holes in the masks (kernels on a GPU; OpenCV on the CPU);
- ``copies``: sending the logits off to be finished (on a GPU: launching the kernels that make
  the masks and their non-blocking copy to the host);
- ``masks out``: waiting for the previous frame's finished masks;
- ``bookkeeping``: the rest (the tracker's memory bank, its moves to storage, the engine's
  state).

It also reports the time the two helper threads spent per frame (``ahead``: decoding and
preprocessing; ``behind``: finishing masks), which overlaps the model's.

With ``--official``, the official ``sam2==1.1.0`` predictor (on ``PYTHONPATH``, installed as
benchmarks/sam2_parity.py says) runs beside ours on the same weights: its model calls
(``forward_image``, the memory attention, the SAM heads, the memory encoder) are the model, its
masks made at the video's resolution and brought to the host (as ours are) are ``masks out``,
and the rest is bookkeeping. It is given the whole video on the device first, as its
``init_state`` does; that is not timed.

Random weights (seeded) and drawn frames, as benchmarks/sam2_speed.py; medians over the tracked
frames after the first two. Prints, per object count, the median frame and each part, and the
time outside the model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from benchmarks.sam2_speed import OFFICIAL_CONFIGS, DrawnFrames, model_inputs, random_checkpoint
from segmentation.engines.sam2.engine import Sam2Engine, Sam2Options

WARM_UP = 2  # tracked frames left out of the medians
MODEL_CALLS = ("condition", "segment", "encode_memory", "mask_as_result")
OFFICIAL_MODEL_CALLS = (
    "forward_image",
    "_prepare_memory_conditioned_features",
    "_forward_sam_heads",
    "_encode_new_memory",
)
PARTS = (
    "frame",
    "frame in",
    "model",
    "holes",
    "copies",
    "masks out",
    "bookkeeping",
    "ahead",
    "behind",
)


class Stopwatch:
    """Time spent in each part, on this thread, for the frame being tracked."""

    def __init__(self) -> None:
        self.parts: defaultdict[str, float] = defaultdict(float)
        self._inside: list[str] = []

    def wrap(self, owner: object, name: str, part: str) -> None:
        """Time ``owner.name`` as ``part``; a part called inside another counts for itself
        alone (the outer part's time excludes it)."""
        function: Callable = getattr(owner, name)

        def timed(*args: object, **kwargs: object) -> object:
            started = time.perf_counter()
            self._inside.append(part)
            try:
                return function(*args, **kwargs)
            finally:
                self._inside.pop()
                spent = time.perf_counter() - started
                self.parts[part] += spent
                if self._inside:
                    self.parts[self._inside[-1]] -= spent

        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        parts, self.parts = dict(self.parts), defaultdict(float)
        return parts


def run(engine: Sam2Engine, frames: DrawnFrames, objects: int) -> dict[str, float]:
    """Ours: median milliseconds per tracked frame, the whole frame and each part."""
    state = engine.open(frames)
    watch, ahead, behind = Stopwatch(), Stopwatch(), Stopwatch()
    watch.wrap(state, "model_input", "frame in")
    watch.wrap(engine, "encode", "model")
    for name in MODEL_CALLS:
        watch.wrap(engine.model, name, "model")
    watch.wrap(state.tracker, "_fill_holes", "holes")
    ahead.wrap(state._frames_ahead, "_prepared", "ahead")
    behind.wrap(state._masks_behind, "_masks", "behind")
    behind.wrap(state._masks_behind, "_copied", "behind")
    finish = state._masks_behind.finish

    def finish_timed(logits: dict) -> object:
        started = time.perf_counter()
        future = finish(logits)
        watch.parts["copies"] += time.perf_counter() - started
        watch.wrap(future, "result", "masks out")
        return future

    state._masks_behind.finish = finish_timed
    span = (frames.width - 1, frames.height - 1)
    for disc in range(objects):
        x, y = frames.centre(0, disc)
        state.add_points(
            frame_index=0,
            object_id=disc + 1,
            points=[[x / span[0], y / span[1]]],
            labels=[1],
        )
    rows = frames_timed(state.propagate(start_frame_index=0), watch, ahead, behind)
    state.close()
    return medians(rows)


def run_official(predictor, frames: DrawnFrames, objects: int) -> dict[str, float]:
    """The official predictor, given the whole video on the device first (as its
    ``init_state`` does; not timed), with its masks brought to the host as ours are."""
    import sam2.sam2_video_predictor as official

    device = predictor.device
    images = model_inputs(frames, device, predictor.image_size)
    official.load_video_frames = lambda **_: (images, frames.height, frames.width)
    watch = Stopwatch()
    for name in OFFICIAL_MODEL_CALLS:
        watch.wrap(predictor, name, "model")
    watch.wrap(predictor, "_get_orig_video_res_output", "masks out")
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        state = predictor.init_state(video_path="drawn")
        for disc in range(objects):
            predictor.add_new_points_or_box(
                state,
                frame_idx=0,
                obj_id=disc + 1,
                points=np.array([frames.centre(0, disc)], dtype=np.float32),
                labels=np.array([1], np.int32),
            )

        def to_host() -> Iterator[np.ndarray]:
            for _, _, masks in predictor.propagate_in_video(state):
                started = time.perf_counter()
                on_host = (masks > 0).cpu().numpy()
                watch.parts["masks out"] += time.perf_counter() - started
                yield on_host

        rows = frames_timed(to_host(), watch)
    return medians(rows)


def frames_timed(tracked: Iterator, watch: Stopwatch, *helpers: Stopwatch) -> list[dict]:
    """Each tracked frame's time on this thread and its parts (the rest is bookkeeping), and
    the ``helpers``' (other threads') time meanwhile."""
    watch.take()
    rows = []
    tracked = iter(tracked)
    while True:
        started = time.perf_counter()
        if next(tracked, None) is None:
            break
        total = time.perf_counter() - started
        parts = watch.take()
        parts["bookkeeping"] = total - sum(parts.values())
        parts["frame"] = total
        for helper in helpers:
            parts.update(helper.take())
        rows.append(parts)
    return rows


def medians(rows: list[dict]) -> dict[str, float]:
    kept = rows[1 + WARM_UP :]  # the first is the clicked frame, given back as it is
    names = [name for name in PARTS if any(name in row for row in kept)]
    result = {name: statistics.median(row.get(name, 0.0) for row in kept) * 1000 for name in names}
    result["outside the model"] = (
        statistics.median((row["frame"] - row.get("model", 0.0)) for row in kept) * 1000
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="tiny", choices=list(OFFICIAL_CONFIGS))
    parser.add_argument("--objects", type=lambda s: [int(n) for n in s.split(",")], default=[1, 3])
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--official", action="store_true", help="also sam2==1.1.0's predictor (on PYTHONPATH)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        checkpoint = random_checkpoint(args.size, Path(work) / f"{args.size}.pt")
        engine = Sam2Engine(Sam2Options(checkpoint=str(checkpoint), device=args.device))
        runs = {"ours": lambda frames, objects: run(engine, frames, objects)}
        if args.official:
            from sam2.build_sam import build_sam2_video_predictor

            predictor = build_sam2_video_predictor(
                OFFICIAL_CONFIGS[args.size], str(checkpoint), device=engine.device
            )
            runs["official"] = lambda frames, objects: run_official(predictor, frames, objects)
        print(
            f"{engine.describe()}, {args.frames} frames of {args.width}x{args.height}; "
            f"medians per tracked frame after the first {WARM_UP}, ms",
            flush=True,
        )
        for objects in args.objects:
            for name, timed in runs.items():
                frames = DrawnFrames(args.frames, args.width, args.height, fps=24)
                result = timed(frames, objects)
                print(
                    f"  {name}, {objects} object{'s' if objects > 1 else ''}: "
                    + ", ".join(f"{part} {value:.1f}" for part, value in result.items()),
                    flush=True,
                )


if __name__ == "__main__":
    main()
