"""The tracking logic of one video: prompts, memory bank and propagation, per object.

Each object keeps its own outputs, as in SAM 2's video predictor:

- ``prompted``: frames with clicks (conditioning frames). Every tracked frame attends to the
  memories of all of them.
- ``tracked``: frames reached by propagation. A frame attends to the six tracked frames just
  before it in the direction of travel, and to the object pointers of up to 15 of them.
- ``pending``: frames clicked since the last propagation; their memories are encoded (from the
  mask the user saw, binarized) when propagation starts.

Clicks on a frame the object was never tracked on make a first conditioning frame; clicks on a
tracked frame are corrections, made with the memories around it and, by default, kept as
conditioning frames too (SAM 2's ``add_all_frames_to_correct_as_cond``), so that propagating
again cannot undo them. Objects never interact, so objects whose memories line up (the usual
case: prompted on the same frames) are run as one batch.

Outputs live on ``storage``; memories are kept in bfloat16, as SAM 2 does. To bound device
memory on long videos, a tracked output that falls out of reach of the frame being tracked is
moved to the CPU (``offload``), and brought back only while it is used again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from segmentation.engines.sam2.holes import holes_filled
from segmentation.engines.sam2.model import PROMPT_MASK_LIMIT, FrameFeatures, Sam2Model

HOLE_LOGIT = 0.1  # a filled hole becomes barely foreground


@dataclass
class FrameOutput:
    mask_logits: torch.Tensor  # 1 x 1 x S/4 x S/4, float32
    pointer: torch.Tensor  # 1 x C
    score: torch.Tensor  # 1 x 1
    memory: torch.Tensor | None = None  # 1 x tokens x mem, bfloat16

    def to(self, device: torch.device) -> FrameOutput:
        memory = self.memory.to(device, non_blocking=True) if self.memory is not None else None
        return FrameOutput(
            self.mask_logits.to(device, non_blocking=True),
            self.pointer.to(device, non_blocking=True),
            self.score.to(device, non_blocking=True),
            memory,
        )


@dataclass
class ObjectTrack:
    clicks: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    prompted: dict[int, FrameOutput] = field(default_factory=dict)
    tracked: dict[int, FrameOutput] = field(default_factory=dict)
    pending: dict[int, tuple[FrameOutput, bool]] = field(default_factory=dict)  # -> prompted?
    directions: dict[int, bool] = field(default_factory=dict)  # tracked frames -> in reverse

    def output(self, frame: int) -> FrameOutput | None:
        pending = self.pending.get(frame)
        if pending is not None:
            return pending[0]
        return self.prompted.get(frame) or self.tracked.get(frame)


@dataclass(frozen=True)
class _Context:
    """What a frame attends to: (slot, memory) and (distance, pointer) pairs."""

    memories: list[tuple[int, torch.Tensor]]
    pointers: list[tuple[int, torch.Tensor]]

    @property
    def layout(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return tuple(s for s, _ in self.memories), tuple(d for d, _ in self.pointers)


class Tracker:
    def __init__(
        self,
        model: Sam2Model,
        frame_count: int,
        features: Callable[[int], FrameFeatures],
        *,
        storage: torch.device,
        corrections_as_prompts: bool = True,
        fill_hole_area: int = 0,
        offload: bool = False,
    ) -> None:
        self.model = model
        self.frame_count = frame_count
        self.features = features
        self.storage = storage
        self.corrections_as_prompts = corrections_as_prompts
        self.fill_hole_area = fill_hole_area
        self.offload = offload
        self.tracks: dict[int, ObjectTrack] = {}
        config = model.config
        self.pointer_span = min(frame_count, config.max_obj_ptrs)
        self.reach = max(config.num_maskmem, self.pointer_span)  # frames a memory is used for

    # Prompts.
    def add_clicks(
        self, frame: int, object_id: int, points: np.ndarray, labels: np.ndarray
    ) -> None:
        """Segment ``object_id`` on ``frame`` from ``points`` (``N x 2``, pixels of the model's
        input) and ``labels``; replaces the object's earlier clicks there."""
        device = self.model.device
        track = self.tracks.setdefault(object_id, ObjectTrack())
        coords = torch.as_tensor(points, dtype=torch.float32, device=device)[None]
        kinds = torch.as_tensor(labels, dtype=torch.int32, device=device)[None]
        track.clicks[frame] = (coords, kinds)
        first = frame not in track.directions
        prompted = first or self.corrections_as_prompts
        previous = track.output(frame)
        mask_prompt = None
        if previous is not None:
            mask_prompt = previous.mask_logits.to(device).clamp(
                -PROMPT_MASK_LIMIT, PROMPT_MASK_LIMIT
            )
        features = self.features(frame)
        if first:
            context = _Context([], [])
        else:
            context = self._context(track, frame, reverse=track.directions[frame])
        conditioned = self.model.condition(
            features, context.memories, context.pointers, self.pointer_span
        )
        result = self.model.segment(
            conditioned, features, coords, kinds, mask_prompt, multimask=coords.shape[1] <= 1
        )
        output = FrameOutput(
            self._fill_holes(result.mask_logits), result.object_pointer, result.object_score
        )
        track.pending[frame] = (self._stored(output), prompted)

    def add_mask(self, frame: int, object_id: int, mask: torch.Tensor) -> None:
        """``object_id``'s result on ``frame`` is ``mask`` (``H x W``, bool, any size); replaces
        the object's clicks there, and becomes a conditioning frame as clicks do."""
        track = self.tracks.setdefault(object_id, ObjectTrack())
        track.clicks.pop(frame, None)
        prompted = frame not in track.directions or self.corrections_as_prompts
        size = self.model.config.image_size
        given = mask.to(self.model.device, torch.float32)[None, None]
        if given.shape[-2:] != (size, size):
            given = F.interpolate(
                given, (size, size), mode="bilinear", align_corners=False, antialias=True
            )
            given = (given >= 0.5).float()
        result = self.model.mask_as_result(self.features(frame), given)
        output = FrameOutput(
            self._fill_holes(result.mask_logits), result.object_pointer, result.object_score
        )
        track.pending[frame] = (self._stored(output), prompted)

    def clear_clicks(self, frame: int, object_id: int) -> None:
        track = self.tracks.get(object_id)
        if track is None:
            return
        track.clicks.pop(frame, None)
        track.pending.pop(frame, None)
        output = track.prompted.pop(frame, None)
        if output is not None:  # its last result stays, as a tracked frame
            track.tracked[frame] = output
            track.directions.pop(frame, None)

    def remove(self, object_id: int) -> None:
        self.tracks.pop(object_id, None)

    def reset(self) -> None:
        self.tracks.clear()

    def logits(self, frame: int) -> dict[int, torch.Tensor | None]:
        """Every object's current mask logits on ``frame`` (``None``: no result there)."""
        results = {}
        for object_id, track in self.tracks.items():
            output = track.output(frame)
            results[object_id] = output.mask_logits if output is not None else None
        return results

    # Propagation.
    def prepare(self) -> None:
        """Before a pass: encode the memories of the frames clicked since the last one and move
        them into the memory bank."""
        for track in self.tracks.values():
            # tracked-frame corrections first, then prompts, as SAM 2 orders its memory bank
            for prompted in (False, True):
                for frame, (output, is_prompt) in track.pending.items():
                    if is_prompt != prompted:
                        continue
                    if output.memory is None:
                        features = self.features(frame)
                        memory = self.model.encode_memory(
                            features,
                            output.mask_logits.to(self.model.device),
                            output.score.to(self.model.device),
                            from_clicks=True,
                        )
                        output.memory = memory.to(torch.bfloat16).to(self.storage)
                    (track.prompted if prompted else track.tracked)[frame] = output
            track.pending.clear()
            for frame in track.prompted:
                track.tracked.pop(frame, None)

    def track(self, frame: int, *, reverse: bool) -> dict[int, torch.Tensor | None]:
        """Every object's mask logits on ``frame``, tracked from its memories (prompted frames
        keep their clicked result)."""
        results: dict[int, torch.Tensor | None] = {}
        groups: dict[tuple, list[tuple[int, ObjectTrack, _Context]]] = {}
        for object_id, track in self.tracks.items():
            if not track.prompted:
                results[object_id] = None
                continue
            track.directions[frame] = reverse
            if frame in track.prompted:
                results[object_id] = track.prompted[frame].mask_logits
                continue
            context = self._context(track, frame, reverse=reverse)
            groups.setdefault(context.layout, []).append((object_id, track, context))
        for members in groups.values():
            self._track_batch(frame, members)
            for object_id, track, _ in members:
                results[object_id] = track.tracked[frame].mask_logits
                if self.offload:
                    self._offload(track, frame - self.reach if not reverse else frame + self.reach)
        return {object_id: results[object_id] for object_id in self.tracks}

    def _track_batch(self, frame: int, members: list[tuple[int, ObjectTrack, _Context]]) -> None:
        batch = len(members)
        contexts = [context for _, _, context in members]
        memories = [
            (slot, torch.cat([c.memories[i][1] for c in contexts]))
            for i, (slot, _) in enumerate(contexts[0].memories)
        ]
        pointers = [
            (distance, torch.cat([c.pointers[i][1] for c in contexts]))
            for i, (distance, _) in enumerate(contexts[0].pointers)
        ]
        features = self.features(frame).expand(batch)
        conditioned = self.model.condition(features, memories, pointers, self.pointer_span)
        result = self.model.segment(conditioned, features, None, None, None, multimask=True)
        memory = self.model.encode_memory(
            features, result.mask_logits, result.object_score, from_clicks=False
        ).to(torch.bfloat16)
        for index, (_, track, _) in enumerate(members):
            span = slice(index, index + 1)
            track.tracked[frame] = self._stored(
                FrameOutput(
                    self._fill_holes(result.mask_logits[span]),
                    result.object_pointer[span],
                    result.object_score[span],
                    memory[span],
                )
            )

    def _context(self, track: ObjectTrack, frame: int, *, reverse: bool) -> _Context:
        device = self.model.device
        step = -1 if reverse else 1
        memories = [(0, output.memory) for output in track.prompted.values()]
        slots = self.model.config.num_maskmem
        for slot in range(1, slots):
            output = track.tracked.get(frame - step * (slots - slot))
            if output is not None:
                memories.append((slot, output.memory))
        signed = self.model.config.signed_pointer_positions
        pointers = [
            ((frame - t) * step if signed else abs(frame - t), output.pointer)
            for t, output in track.prompted.items()
            if (t >= frame if reverse else t <= frame)
        ]
        for distance in range(1, self.pointer_span):
            t = frame - step * distance
            if not 0 <= t < self.frame_count:
                break
            output = track.tracked.get(t)
            if output is not None:
                pointers.append((distance, output.pointer))
        return _Context(
            [(slot, memory.to(device, non_blocking=True)) for slot, memory in memories],
            [(distance, pointer.to(device, non_blocking=True)) for distance, pointer in pointers],
        )

    # Storage.
    def _stored(self, output: FrameOutput) -> FrameOutput:
        return output if output.mask_logits.device == self.storage else output.to(self.storage)

    def _offload(self, track: ObjectTrack, frame: int) -> None:
        output = track.tracked.get(frame)
        if output is not None and output.mask_logits.device.type != "cpu":
            track.tracked[frame] = output.to(torch.device("cpu"))

    def _fill_holes(self, logits: torch.Tensor) -> torch.Tensor:
        """Background specks of at most ``fill_hole_area`` pixels (at the logits' resolution)
        inside a mask become foreground."""
        return holes_filled(logits, self.fill_hole_area, HOLE_LOGIT)
