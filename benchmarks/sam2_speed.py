"""Propagation speed and memory of the ``sam2`` engine, and of the official predictor beside it.

    .venv/bin/python benchmarks/sam2_speed.py --size tiny [--objects 1] [--seconds 10]
        [--fps 24] [--width 1280 --height 720] [--compile [--compile-mode M]] [--device auto]
        [--impl ours|official] [--checkpoint FILE] [--sample-every N] [--json OUT.json]
        [--profile FILE [--profile-first]]

Without ``--checkpoint`` the model of ``--size`` gets random weights (seeded, so every process
builds the same ones; the object-score head leans towards "object present", as real weights do
on a clicked object): speed and memory do not depend on the weights' values. Frames are drawn in
memory (discs moving over a gradient) and served through a frame source like a decoded video.

One run, after a warm-up (a click and 16 frames of propagation, then everything cleared):

- first click: the median over 5 frames never seen before of one positive click, the frame's
  image encoding included, until the mask is in host memory; then a click on a frame already
  encoded (the median of 5 single clicks, each replacing the last, on one such frame);
- propagation: one object per disc clicked on frame 0, then the whole video tracked from
  frame 0, ``--passes`` times (3); frames/s over the whole pass (what a user waits for) and from
  the median frame time, of the pass of median speed (of two, the faster), and every pass's
  frames/s in the order they ran (``fps_passes``: the first is the video's first pass);
- peak device memory over the session (CUDA) and the process's peak RSS.

``--impl official`` runs SAM 2's own video predictor (``sam2==1.1.0``, importable as ``sam2``:
it is not a dependency of this project) on the same frames, weights and clicks: its frames are
the same normalized 1024x1024 tensors, put on the device as its ``init_state`` does, and
``--compile`` builds it with ``vos_optimized=True`` (every part compiled, as its published
speeds were measured). It is timed twice: as its own benchmark does (masks left on the device)
and with each frame's masks brought to host memory, as this engine always delivers them.

``--size edgetam`` takes EdgeTAM (``edgetam-dimos==1.0.1`` importable as ``sam2``; see
official_env.py), whose predictor cannot track two objects together as shipped (its issue 15):
it is run with the workaround in :func:`edgetam_prepared`, or as shipped with ``--as-shipped``.
``--precision`` applies to both implementations (``auto``: the engine's choice; the official
predictor then runs under autocast to that dtype where it is not float32).

``--sample-every N`` records device and host memory every N tracked frames (the long-video
check: device memory must stay flat as the tracking front moves). ``--store`` runs ours as a
session does, with a store beside the engine (``VideoState.recall``): each frame's masks kept as
COCO RLE as they come, the engine keeping only what its next frame needs (without it, the engine
keeps every frame's outputs, as the evaluation does). ``--profile FILE`` writes
PyTorch's profile of 24 frames of a pass after the timed ones; with ``--profile-first``, of the
video's first pass instead (ours), before the timed passes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from segmentation.engines.frames import FrameSource
from segmentation.engines.sam2.checkpoint import checkpoint_save
from segmentation.engines.sam2.config import size_config
from segmentation.engines.sam2.engine import Sam2Engine, Sam2Options, device_choose
from segmentation.engines.sam2.model import Sam2Model
from segmentation.engines.sam2.pipeline import IMAGE_MEAN, IMAGE_STD
from segmentation.engines.sam2.precision import CHOICES as PRECISION_CHOICES
from segmentation.engines.sam2.precision import precision_choose, precision_name
from segmentation.rle import rle_decode, rle_encode

OFFICIAL_CONFIGS = {
    "tiny": "configs/sam2.1/sam2.1_hiera_t.yaml",
    "small": "configs/sam2.1/sam2.1_hiera_s.yaml",
    "base_plus": "configs/sam2.1/sam2.1_hiera_b+.yaml",
    "large": "configs/sam2.1/sam2.1_hiera_l.yaml",
    "edgetam": "configs/edgetam.yaml",  # from edgetam-dimos==1.0.1, also importable as sam2
}
COLOURS = [(220, 40, 40), (40, 200, 60), (50, 80, 230)]
WARM_UP_FRAMES = 16
CLICK_SAMPLES = 5


class DrawnFrames(FrameSource):
    """Discs moving over a gradient, drawn on demand (cheaply: a stamp per disc)."""

    def __init__(self, count: int, width: int, height: int, fps: float) -> None:
        super().__init__()
        self.count, self.width, self.height, self.fps = count, width, height, fps
        ys, xs = np.mgrid[:height, :width]
        self._background = np.stack(
            [60 + 80 * xs / width, 90 + 60 * ys / height, np.full(xs.shape, 110.0)], axis=-1
        ).astype(np.uint8)
        self.radius = int(height * 0.12)
        span = np.arange(-self.radius, self.radius + 1)
        self._stamp = span[:, None] ** 2 + span[None, :] ** 2 < self.radius**2

    def __len__(self) -> int:
        return self.count

    def centre(self, index: int, disc: int) -> tuple[int, int]:
        """Disc ``disc``'s centre on frame ``index``: it sweeps back and forth, never leaving."""
        swing = self.width * 0.2
        phase = (index % 240) / 240 * 2 * np.pi
        cx = self.width * (0.25 + 0.25 * disc) + swing * np.sin(phase + disc) * 0.5
        cy = self.height * 0.5 + self.height * 0.2 * np.cos(phase * (disc + 1))
        return int(cx), int(cy)

    def disc_mask(self, index: int, disc: int) -> np.ndarray:
        """Where disc ``disc`` is on frame ``index`` (later discs may cover it)."""
        mask = np.zeros((self.height, self.width), bool)
        cx, cy, r = *self.centre(index, disc), self.radius
        window = mask[cy - r : cy + r + 1, cx - r : cx + r + 1]
        window[self._stamp[: window.shape[0], : window.shape[1]]] = True
        return mask

    def _decode(self, index: int) -> np.ndarray:
        image = self._background.copy()
        r = self.radius
        for disc, colour in enumerate(COLOURS):
            cx, cy = self.centre(index, disc)
            window = image[cy - r : cy + r + 1, cx - r : cx + r + 1]
            window[self._stamp[: window.shape[0], : window.shape[1]]] = colour
        return self._keep(index, image)


def random_checkpoint(size: str, path: Path) -> Path:
    torch.manual_seed(0)
    model = Sam2Model(size_config(size))
    with torch.no_grad():
        model.sam_mask_decoder.pred_obj_score_head.layers[-1].bias.fill_(2.0)
    checkpoint_save(model, path)
    return path


def edgetam_prepared(*, as_shipped: bool = False) -> None:
    """EdgeTAM's reference, as its package builds it, with two changes: its timm trunk is made
    without downloading ImageNet weights (random ones are loaded over them anyway), and its
    perceiver compresses the memories of several objects one object at a time. Its own code
    reshapes the batch of 2D latents with ``view`` after ``expand``, which raises as soon as two
    objects are tracked together (facebookresearch/EdgeTAM issue 15); run per object, it
    computes what that line computes with ``reshape`` in place of ``view``, the issue's fix."""
    import sam2.modeling.backbones.timm as timm_backbone
    from sam2.modeling.perceiver import PerceiverResampler

    if getattr(PerceiverResampler, "per_object", False):
        return
    create = timm_backbone.create_model
    timm_backbone.create_model = lambda *args, **kwargs: create(
        *args, **{**kwargs, "pretrained": False}
    )
    if as_shipped:
        return
    forward_2d = PerceiverResampler.forward_2d

    def per_object(self, x):
        parts = [forward_2d(self, x[i : i + 1]) for i in range(x.shape[0])]
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

    PerceiverResampler.forward_2d = per_object
    PerceiverResampler.per_object = True


def model_inputs(frames: DrawnFrames, device: torch.device, size: int) -> torch.Tensor:
    """Every frame as the model sees it (``N x 3 x S x S``, normalized), on ``device``: the
    official predictor's ``init_state`` puts the whole video there."""
    mean = torch.tensor(IMAGE_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGE_STD, device=device).view(1, 3, 1, 1)
    images = torch.empty(len(frames), 3, size, size, device=device)
    for index in range(len(frames)):
        pixels = torch.from_numpy(frames.frame(index).copy()).to(device).permute(2, 0, 1)[None]
        pixels = F.interpolate(pixels.float() / 255, (size, size), mode="bilinear", antialias=True)
        images[index] = ((pixels - mean) / std)[0]
    return images


class Meter:
    """Times, memory samples and peaks of one run."""

    def __init__(self, device: torch.device, sample_every: int) -> None:
        self.device, self.sample_every = device, sample_every
        self.samples: list[dict[str, float]] = []
        self.cuda = device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)

    def peak_mb(self) -> float | None:
        return torch.cuda.max_memory_allocated(self.device) / 2**20 if self.cuda else None

    def sample(self, tracked: int) -> None:
        if not self.sample_every or tracked % self.sample_every:
            return
        sample = {"frames": tracked, "rss_mb": rss_mb()}
        if self.cuda:
            sample["cuda_mb"] = torch.cuda.memory_allocated(self.device) / 2**20
            sample["cuda_reserved_mb"] = torch.cuda.memory_reserved(self.device) / 2**20
        self.samples.append(sample)

    def profile(self, frames: Iterator, path: Path | None, count: int = 24) -> None:
        """Profile ``count`` frames of ``frames`` into ``path``: operators by device time, then
        by host time (where the launches and synchronisations show)."""
        if path is None:
            return
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as profiler:
            for _ in zip(range(count), frames, strict=False):
                pass
            self.sync()
        averages = profiler.key_averages()
        with path.open("w") as out:
            for key in ("device_time_total", "cpu_time_total"):
                out.write(f"{count} frames, by {key}\n")
                out.write(averages.table(sort_by=key, row_limit=40) + "\n\n")

    def timed_passes(self, passes: Callable[[], Iterator], count: int) -> dict:
        """``count`` timed passes over ``passes()``: the one of median speed (of two, the
        faster), and every speed in the order they ran (host-bound work varies from pass to
        pass, and a first pass through frames can differ from the next: on an H100 this engine's
        first was often the slower by up to half)."""
        results = [self.timed_pass(passes()) for _ in range(count)]
        median = dict(sorted(results, key=lambda r: r["fps"])[len(results) // 2])
        median["fps_passes"] = [round(result["fps"], 2) for result in results]
        return median

    def timed_pass(self, frames: Iterator) -> dict[str, float]:
        """Drain ``frames`` (one item per tracked frame), timing each."""
        times: list[float] = []
        self.sync()
        started = last = time.perf_counter()
        for _ in frames:
            now = time.perf_counter()
            times.append(now - last)
            last = now
            self.sample(len(times))
        self.sync()
        total = time.perf_counter() - started
        return {
            "frames": len(times),
            "fps": len(times) / total,
            "fps_median_frame": 1 / statistics.median(times),
        }


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def median_ms(run: Callable[[], object], meter: Meter, count: int) -> float:
    times = []
    for _ in range(count):
        meter.sync()
        started = time.perf_counter()
        run()
        meter.sync()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def unseen_frames(count: int) -> Iterator[int]:
    """Frames for the first-click samples: in the second half, which the warm-up never reaches."""
    return iter(np.linspace(count // 2, count - 1, CLICK_SAMPLES).astype(int).tolist())


def run_ours(args: argparse.Namespace, checkpoint: Path, frames: DrawnFrames) -> dict:
    options = Sam2Options(
        checkpoint=str(checkpoint),
        device=args.device,
        precision=args.precision,
        compile=args.compile,
        compile_mode=args.compile_mode,
    )
    engine = Sam2Engine(options)
    meter = Meter(engine.device, args.sample_every)
    span = (frames.width - 1, frames.height - 1)

    def click(state, index: int, disc: int) -> None:
        x, y = frames.centre(index, disc)
        state.add_points(
            frame_index=index, object_id=disc + 1, points=[[x / span[0], y / span[1]]], labels=[1]
        )

    meter.reset_peak()
    state = engine.open(frames)
    store = RleStore() if args.store else None
    if store is not None:
        state.recall = store.recall
    started = time.perf_counter()
    click(state, 0, 0)
    first_ever_ms = (time.perf_counter() - started) * 1000
    for _, _ in zip(range(WARM_UP_FRAMES), state.propagate(start_frame_index=0), strict=False):
        pass
    state.clear_points_in_video()
    samples = unseen_frames(len(frames))

    def fresh_click() -> None:
        click(state, next(samples), 0)
        state.clear_points_in_video()

    click_ms = median_ms(fresh_click, meter, CLICK_SAMPLES)
    encoded = len(frames) // 2
    click(state, encoded, 0)
    encoded_click_ms = median_ms(lambda: click(state, encoded, 0), meter, CLICK_SAMPLES)
    state.clear_points_in_video()
    for disc in range(args.objects):
        click(state, 0, disc)

    def passes() -> Iterator:
        frames = state.propagate(start_frame_index=0)
        return frames if store is None else store.kept(frames)

    if args.profile_first:  # the video's first pass (then the timed passes are not)
        meter.profile(passes(), args.profile)
    result = meter.timed_passes(passes, args.passes)
    if not args.profile_first:
        meter.profile(passes(), args.profile)
    result.update(first_click_ms=click_ms, first_click_cold_ms=first_ever_ms)
    result["encoded_click_ms"] = encoded_click_ms
    result["peak_cuda_mb"] = meter.peak_mb()
    result["memory_bank_mb_per_frame_object"] = _bank_mb(state) / (len(frames) * args.objects)
    result["samples"] = meter.samples
    result["device_name"] = device_name(engine.device)
    result["precision"] = precision_name(engine.dtype)
    state.close()
    return result


class RleStore:
    """What a session's store keeps beside the engine: each frame's masks as COCO RLE, as they
    are yielded, outside the process's memory (``services/work_store.py`` keeps them in the
    database; here a temporary file, and where each frame's lie in it), so that the process's
    resident memory is the engine's."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 (closed with the process)
        self.at: dict[int, tuple[int, int]] = {}

    def kept(self, frames: Iterator) -> Iterator:
        for index, masks in frames:
            encoded = {str(k): rle_encode(mask) for k, mask in masks.items()}
            data = json.dumps(encoded).encode()
            self.file.seek(0, os.SEEK_END)
            self.at[index] = (self.file.tell(), len(data))
            self.file.write(data)
            yield index, masks

    def recall(self, index: int) -> dict[int, np.ndarray]:
        if index not in self.at:
            return {}
        offset, length = self.at[index]
        self.file.seek(offset)
        encoded = json.loads(self.file.read(length))
        return {int(k): rle_decode(rle) for k, rle in encoded.items()}


def _bank_mb(state) -> float:
    """What the memory bank holds: the tensors of every object's prompted and tracked frames."""
    total = 0
    for track in state.tracker.tracks.values():
        for output in [*track.prompted.values(), *track.tracked.values()]:
            tensors = [output.mask_logits, output.pointer, output.score, output.memory]
            total += sum(t.nbytes for t in tensors if t is not None)
    return total / 2**20


def run_official(args: argparse.Namespace, checkpoint: Path, frames: DrawnFrames) -> dict:
    import sam2.sam2_video_predictor as official
    from sam2.build_sam import build_sam2_video_predictor

    device = device_choose(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    extra = {"vos_optimized": True} if args.compile else {}  # EdgeTAM's predictor has no such
    if args.size == "edgetam":
        edgetam_prepared(as_shipped=args.as_shipped)
    predictor = build_sam2_video_predictor(
        OFFICIAL_CONFIGS[args.size], str(checkpoint), device=device, **extra
    )
    dtype = precision_choose(args.precision, device)
    meter = Meter(device, args.sample_every)
    meter.reset_peak()
    images = model_inputs(frames, device, predictor.image_size)
    official.load_video_frames = lambda **_: (images, frames.height, frames.width)
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)
    with autocast:
        state = predictor.init_state(video_path="drawn")

        def click(index: int, disc: int) -> torch.Tensor:
            _, _, masks = predictor.add_new_points_or_box(
                state,
                frame_idx=index,
                obj_id=disc + 1,
                points=np.array([frames.centre(index, disc)], dtype=np.float32),
                labels=np.array([1], np.int32),
            )
            return (masks > 0).cpu().numpy()

        started = time.perf_counter()
        click(0, 0)
        first_ever_ms = (time.perf_counter() - started) * 1000
        for _ in zip(range(WARM_UP_FRAMES), predictor.propagate_in_video(state), strict=False):
            pass
        predictor.reset_state(state)
        samples = unseen_frames(len(frames))

        def fresh_click() -> None:
            click(next(samples), 0)
            predictor.reset_state(state)

        click_ms = median_ms(fresh_click, meter, CLICK_SAMPLES)
        encoded = len(frames) // 2
        click(encoded, 0)
        encoded_click_ms = median_ms(lambda: click(encoded, 0), meter, CLICK_SAMPLES)
        predictor.reset_state(state)
        for disc in range(args.objects):
            click(0, disc)
        as_benchmarked = meter.timed_passes(
            lambda: predictor.propagate_in_video(state), args.passes
        )

        def to_host() -> Iterator[np.ndarray]:
            for _, _, masks in predictor.propagate_in_video(state):
                yield (masks > 0).cpu().numpy()

        to_host_pass = meter.timed_passes(to_host, args.passes)
        meter.profile(to_host(), args.profile)
    result = dict(to_host_pass)
    result["fps_masks_on_device"] = as_benchmarked["fps"]
    result["fps_median_frame_masks_on_device"] = as_benchmarked["fps_median_frame"]
    result.update(first_click_ms=click_ms, first_click_cold_ms=first_ever_ms)
    result["encoded_click_ms"] = encoded_click_ms
    result["peak_cuda_mb"] = meter.peak_mb()
    result["samples"] = meter.samples
    result["device_name"] = device_name(device)
    result["precision"] = precision_name(dtype)
    return result


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="tiny", choices=list(OFFICIAL_CONFIGS))
    parser.add_argument("--impl", default="ours", choices=["ours", "official"])
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--fps", type=float, default=24.0)
    parser.add_argument("--objects", type=int, default=1, choices=[1, 2, 3])
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--precision", default="auto", choices=PRECISION_CHOICES)
    parser.add_argument("--as-shipped", action="store_true", help="EdgeTAM without workaround")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--compile-mode", default=Sam2Options.compile_mode)
    parser.add_argument("--passes", type=int, default=3, help="timed passes; the median counts")
    parser.add_argument("--sample-every", type=int, default=0)
    parser.add_argument("--store", action="store_true", help="ours with a store beside it")
    parser.add_argument("--profile", type=Path, help="write a profile of 24 frames here")
    parser.add_argument(
        "--profile-first", action="store_true", help="ours: profile the first pass, not a later"
    )
    parser.add_argument("--json", type=Path, help="append the result as one JSON line")
    args = parser.parse_args()

    frames = DrawnFrames(round(args.seconds * args.fps), args.width, args.height, args.fps)
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = args.checkpoint or random_checkpoint(args.size, Path(folder) / "random.pt")
        run = run_official if args.impl == "official" else run_ours
        result = run(args, checkpoint, frames)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result.update(
        impl=args.impl,
        size=args.size,
        objects=args.objects,
        isa=os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
        compile=args.compile and (args.compile_mode if args.impl == "ours" else "vos_optimized"),
        video=f"{args.width}x{args.height}, {len(frames)} frames",
        torch=torch.__version__,
        cuda=torch.version.cuda,
    )
    line = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(line))
    for sample in result["samples"]:
        print(json.dumps(sample))
    if args.json:
        with args.json.open("a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
