"""The ``sam2`` engine: SAM 2 / SAM 2.1 behind the engine interface.

One model is loaded per process and shared by every session. A session never holds the video:
frames are decoded by the :class:`FrameSource` (itself a bounded cache) when needed, and their
image features kept in a small LRU cache, so opening a long video costs nothing and memory stays
flat while it propagates. While it propagates, the next frame is decoded and preprocessed in the
background, and each frame's masks are finished in another thread while the next frame runs
(:mod:`.pipeline`): the thread that launches the model's kernels does little else. The model runs
under bfloat16 autocast where the hardware computes it natively (CUDA, with TF32 matrix products
as SAM 2's demo does; CPUs with AMX or AVX-512 BF16), in float32 elsewhere (:mod:`.precision`).

The tracker (:mod:`.tracker`) keeps every tracked frame's output (mask logits, memory, object
pointer: 0.31 MB a frame and object for EdgeTAM) until :attr:`~VideoState.recall` is set; then
it keeps the conditioning frames and what is within reach of the frame being tracked, and a
frame it no longer holds shows the masks ``recall`` gives (an object it still holds, or tracks
there anew, takes its pixels first). A correction far from the last tracked frame rebuilds the
memories it attends to from recalled masks, re-encoding those frames; a restored anchor
(:meth:`~VideoState.restore`) is shown as given and made a conditioning frame when first needed.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from core.malloc import malloc_keep_tensors
from segmentation.engines.base import Engine, EngineOptions, Masks, Prompt, VideoState
from segmentation.engines.frames import FrameSource
from segmentation.engines.sam2.catalogue import checkpoint_resolve
from segmentation.engines.sam2.checkpoint import checkpoint_load
from segmentation.engines.sam2.config import MODEL_SIZES, SIZE_ALIASES
from segmentation.engines.sam2.holes import MAX_AREA as HOLE_AREA_LIMIT
from segmentation.engines.sam2.model import FrameFeatures, Sam2Model
from segmentation.engines.sam2.pipeline import FramesAhead, MasksBehind
from segmentation.engines.sam2.precision import CHOICES as PRECISION_CHOICES
from segmentation.engines.sam2.precision import precision_choose, precision_name
from segmentation.engines.sam2.tracker import Result, Tracker

T = TypeVar("T")
DEVICES = ("auto", "cuda", "mps", "cpu")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class Sam2Options(EngineOptions):
    # a checkpoint's path, or an official one's name (tiny ... large, or a file's stem such as
    # sam2_hiera_small) found in models_dir (catalogue.checkpoint_resolve)
    checkpoint: str = ""
    models_dir: str = ""  # where `manage.py sam2_weights fetch` puts the official files
    model_size: str = ""  # empty: read from the checkpoint
    device: str = "auto"  # auto: cuda, then mps, then cpu (also cuda:1 and the like)
    precision: str = "auto"  # auto, float32, bfloat16 (precision.py: auto is the hardware's)
    compile: bool = False  # torch.compile the model's parts (about a minute before the first frame)
    compile_mode: str = "reduce-overhead"  # torch.compile's mode; this one runs CUDA graphs
    feature_cache: int = 4  # frames whose image features a session keeps
    fill_hole_area: int = 8  # mask holes up to this many low-res pixels are filled
    corrections_as_prompts: bool = True  # clicks on tracked frames become conditioning frames

    def __post_init__(self) -> None:
        if not self.checkpoint:
            raise ValueError("option 'checkpoint' is required (set SAM2_CHECKPOINT)")
        if self.model_size and self.model_size not in {*MODEL_SIZES, *SIZE_ALIASES}:
            known = ", ".join([*SIZE_ALIASES, *MODEL_SIZES])
            raise ValueError(f"model_size must be one of {known}, got {self.model_size!r}")
        kind = self.device.split(":")[0]
        if kind not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.precision not in PRECISION_CHOICES:
            known = ", ".join(PRECISION_CHOICES)
            raise ValueError(f"precision must be one of {known}, got {self.precision!r}")
        if self.compile_mode not in COMPILE_MODES:
            known = ", ".join(COMPILE_MODES)
            raise ValueError(f"compile_mode must be one of {known}, got {self.compile_mode!r}")
        if not 1 <= self.feature_cache <= 256:
            raise ValueError(f"feature_cache must be within 1..256, got {self.feature_cache}")
        if not 0 <= self.fill_hole_area <= HOLE_AREA_LIMIT:
            raise ValueError(
                f"fill_hole_area must be within 0..{HOLE_AREA_LIMIT}, got {self.fill_hole_area}"
            )

    @property
    def checkpoint_path(self) -> Path:
        """The checkpoint's file; FileNotFoundError, naming the command that fetches an official
        one, when it is missing. Checked when the engine is built (the server's start), not with
        the options: ``manage.py sam2_weights`` must run while the file is still missing."""
        return checkpoint_resolve(self.checkpoint, Path(self.models_dir))


def device_choose(name: str) -> torch.device:
    if name != "auto":
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def model_compile(model: Sam2Model, mode: str) -> Callable[[torch.Tensor], FrameFeatures]:
    """Compile the parts of ``model`` that run on every frame, in place, and return the
    compiled image encoder. The memory attention takes a varying number of memories and
    pointers, so it is compiled for dynamic shapes; the rest for the shapes they meet. Compiled
    parts may run as CUDA graphs, whose outputs live in buffers the next replay overwrites:
    what they return is copied out before anyone keeps it."""
    if model.device.type == "cpu":
        # loaded only to compile (and by name: `import torch._inductor.config` here would make
        # `torch` a local name of this function, unbound on every other device)
        from torch._inductor import config as inductor

        # weights as constants, so that the CPU's convolutions and matrix products get them
        # packed once in oneDNN's layout: EdgeTAM at 854x480 on 2 cores went from 3.98 to
        # 4.89 frames/s with it
        inductor.freezing = True
    compiled = functools.partial(torch.compile, mode=mode)
    for part, dynamic in (
        (model.memory_attention, True),
        (model.memory_encoder, False),
        (model.sam_mask_decoder, False),
    ):
        part.forward = _outputs_copied(compiled(part.forward, dynamic=dynamic))
    return _outputs_copied(compiled(model.encode_image, dynamic=False))


def _outputs_copied(function: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(function)
    def call(*args: object, **kwargs: object) -> T:
        return _copied(function(*args, **kwargs))

    return call


def _copied(value: T) -> T:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return type(value)(_copied(item) for item in value)
    if dataclasses.is_dataclass(value):
        fields = {
            field.name: _copied(getattr(value, field.name)) for field in dataclasses.fields(value)
        }
        return dataclasses.replace(value, **fields)
    return value


class Sam2Engine(Engine):
    name = "sam2"
    Options = Sam2Options

    def __init__(self, options: Sam2Options | None = None) -> None:
        super().__init__(options)
        self.device = device_choose(self.options.device)
        model = checkpoint_load(self.options.checkpoint_path, model_size=self.options.model_size)
        self.model: Sam2Model = model.to(self.device)
        self.dtype = precision_choose(self.options.precision, self.device)
        if self.device.type == "cpu":
            malloc_keep_tensors()
            self.model.channels_last()
        if self.dtype != torch.float32:
            self.model.weights_cast(self.dtype)
        if self.device.type == "cuda":
            # TF32 matrix products beside bfloat16, as SAM 2's demo runs; float32 asked for is
            # float32 (parity with the official code, and a GPU tracking as the CPU does)
            low = self.dtype != torch.float32
            torch.backends.cuda.matmul.allow_tf32 = low
            torch.backends.cudnn.allow_tf32 = low
        self.encode = self.model.encode_image
        if self.options.compile:
            self.encode = model_compile(self.model, self.options.compile_mode)

    def describe(self) -> str:
        """``SAM 2.1 base_plus on cuda:0 (bfloat16)``, ``EdgeTAM on cpu (float32)``; a SAM 2
        model of no official size is ``custom``."""
        config = self.model.config
        name = config.family
        if config.backbone == "hiera":
            stem = next((name for name, known in MODEL_SIZES.items() if known == config), "")
            name += " " + (stem.partition("_hiera_")[2] or "custom")
        device = self.device
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        return f"{name} on {device} ({precision_name(self.dtype)})"

    def calls_at_once(self, cores: int) -> int:
        """On the CPU, as many calls as the cores hold torch's threads (each call's operators
        run on all of them, ``torch.get_num_threads()``: usually one call). On a GPU two, so
        that one call's kernels run while the other's Python prepares its next (not measured
        against one or three)."""
        if self.device.type == "cpu":
            return max(1, cores // max(1, torch.get_num_threads()))
        return 2

    def open(self, frames: FrameSource) -> Sam2VideoState:
        return Sam2VideoState(frames, self)

    def autocast(self) -> torch.autocast:
        enabled = self.dtype != torch.float32
        return torch.autocast(self.device.type, dtype=self.dtype, enabled=enabled)


class Sam2VideoState(VideoState):
    def __init__(self, frames: FrameSource, engine: Sam2Engine) -> None:
        self._recall: Callable[[int], Masks] | None = None
        super().__init__(frames)
        self._engine = engine
        self._model = engine.model
        self._features: OrderedDict[int, FrameFeatures] = OrderedDict()
        device = engine.device
        self._frames_ahead = FramesAhead(frames, self._model.config.image_size, device)
        self._masks_behind = MasksBehind(frames.height, frames.width, device)
        options = engine.options
        self.tracker = Tracker(
            self._model,
            len(frames),
            self.features,
            storage=engine.device,
            corrections_as_prompts=options.corrections_as_prompts,
            fill_hole_area=options.fill_hole_area,
            offload=engine.device.type != "cpu",
        )
        self.tracker.recall = self._recall

    @property  # type: ignore[override]
    def recall(self) -> Callable[[int], Masks] | None:
        return self._recall

    @recall.setter
    def recall(self, recall: Callable[[int], Masks] | None) -> None:
        self._recall = recall
        tracker = getattr(self, "tracker", None)  # set by VideoState.__init__ before it exists
        if tracker is not None:
            tracker.recall = recall

    # Frames.
    def model_input(self, frame_index: int) -> torch.Tensor:
        """Frame ``frame_index`` as the model sees it: ``1 x 3 x S x S``, normalized."""
        return self._frames_ahead.take(frame_index)

    def features(self, frame_index: int) -> FrameFeatures:
        cached = self._features.get(frame_index)
        if cached is not None:
            self._features.move_to_end(frame_index)
            return cached
        features = self._engine.encode(self.model_input(frame_index))
        self._features[frame_index] = features
        while len(self._features) > self._engine.options.feature_cache:
            self._features.popitem(last=False)
        return features

    # Engine operations.
    def _run(self, work: Callable[[], T]) -> T:
        with torch.inference_mode(), self._engine.autocast():
            return work()

    def _model_points(self, prompt: Prompt) -> np.ndarray:
        """The prompt's points in pixels of the model's input."""
        span = np.array([max(self.frames.width - 1, 1), max(self.frames.height - 1, 1)])
        return prompt.points / span * self._model.config.image_size

    def _segment(self, frame_index: int, object_id: int) -> Masks:
        prompt = self.prompts[object_id][frame_index]
        points = self._model_points(prompt)
        self._run(lambda: self.tracker.add_clicks(frame_index, object_id, points, prompt.labels))
        return self._masks(frame_index)

    def _masked(self, frame_index: int, object_id: int, mask: np.ndarray) -> None:
        given = torch.from_numpy(mask)
        self._run(lambda: self.tracker.add_mask(frame_index, object_id, given))

    def _restored(
        self,
        frame_index: int,
        object_id: int,
        prompt: Prompt | None,
        mask: np.ndarray,
        kept: bytes | None,
    ) -> None:
        # SAM 2 keeps no form of its own (anchor_kept): its conditioning output is rebuilt
        # from the mask and the clicks when it is first needed
        if prompt is None:
            self.tracker.restore(frame_index, object_id, None, None, mask)
        else:
            points = self._model_points(prompt)
            self.tracker.restore(frame_index, object_id, points, prompt.labels, mask)

    def _masks(self, frame_index: int) -> Masks:
        finished = self._finished(self.tracker.logits(frame_index))
        return finished.result() if isinstance(finished, Future) else finished

    def _finished(self, results: dict[int, Result]) -> Future[Masks] | Masks:
        """The video's masks of the tracker's results: logits finished in another thread;
        masks known as shown (restored, recalled) taking the pixels no logits took."""
        known = {k: mask for k, mask in results.items() if isinstance(mask, np.ndarray)}
        if not known:
            return self._run(lambda: self._masks_behind.finish(results))  # type: ignore[arg-type]
        logits = {k: None if k in known else value for k, value in results.items()}
        masks = self._run(lambda: self._masks_behind.finish(logits)).result()  # type: ignore[arg-type]
        taken = np.zeros((self.frames.height, self.frames.width), bool)
        for object_id, mask in masks.items():
            if object_id not in known:
                taken |= mask
        for object_id, mask in known.items():
            masks[object_id] = mask & ~taken
        return masks

    def _cleared(self, frame_index: int, object_id: int) -> Masks:
        self.tracker.clear_clicks(frame_index, object_id)
        return self._masks(frame_index)

    def _reset(self) -> None:
        self.tracker.reset()

    def _removed(self, object_id: int) -> None:
        self.tracker.remove(object_id)

    def _start_pass(self, frame_index: int) -> None:
        self._run(lambda: self.tracker.prepare(frame_index))

    def _track(self, frame_index: int, *, reverse: bool) -> Future[Masks] | Masks:
        following = frame_index - 1 if reverse else frame_index + 1
        if 0 <= following < self.frame_count and following not in self._features:
            self._frames_ahead.fetch(following)
        results = self._run(lambda: self.tracker.track(frame_index, reverse=reverse))
        return self._finished(results)

    def close(self) -> None:
        self._frames_ahead.close()
        self._masks_behind.close()
        self._features.clear()
        self.tracker.reset()
