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

Flat memory. Once ``recall`` is set (the masks the session's store keeps for a frame, every
object's as last shown: :attr:`VideoState.recall`), the tracker keeps only what the next frame
needs: the conditioning frames' outputs, the tracked outputs within ``reach`` of the frame last
tracked (behind it in the direction of travel) and of the pass's start frame (which the backward
half of a propagation sets out from), and each frame's direction in an array of a byte a frame.
Every other tracked output is dropped, wherever it lives; a frame's result that is no longer
held comes from ``recall``. A single pass therefore tracks exactly as without ``recall``.

What a frame attends to and no longer has is made again from recalled masks (``rebuilt``): a
correction far from the last tracked frame, or a pass starting there, re-encodes each of the
frames within reach behind it that had been tracked (image features, then the given-mask path,
:meth:`Sam2Model.mask_as_result`, for its mask logits and object pointer, then
:meth:`Sam2Model.encode_memory`), and the correction's mask prompt is the recalled mask as ±10
logits. This approximates the dropped outputs: the memories hold the mask as shown (binarized,
as a given mask's does) rather than the tracked soft logits, and the pointers are those of the
mask given on the frame's own features rather than those decoded with the memories then held.

Restored anchors (:meth:`Tracker.restore`) are shown as given and become conditioning frames
only when a propagation or a correction first needs them, rebuilt from the mask as shown
(its logits, memory and object score as for a given mask) and, for clicks, the object pointer
decoded from the clicks with that mask as the mask prompt.
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
# an object's direction on a frame (ObjectTrack.directions): never tracked, forward, in reverse
UNTRACKED, FORWARD, REVERSE = 0, 1, 2

# per object: logits (1 x 1 x h x w), the mask as shown (H x W bool: restored, or recalled), or
# None (no result there)
Result = torch.Tensor | np.ndarray | None


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


@dataclass(frozen=True)
class Restored:
    """An anchor given back: its mask as last shown (packed bits of an ``H x W`` mask) and its
    clicks (coordinates and labels as :meth:`Tracker.add_clicks` keeps them; None: a mask)."""

    packed: np.ndarray
    shape: tuple[int, int]
    clicks: tuple[torch.Tensor, torch.Tensor] | None

    @property
    def mask(self) -> np.ndarray:
        height, width = self.shape
        return np.unpackbits(self.packed, count=height * width).reshape(self.shape).astype(bool)


@dataclass
class ObjectTrack:
    directions: np.ndarray  # per frame: UNTRACKED, FORWARD or REVERSE (int8)
    clicks: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    prompted: dict[int, FrameOutput] = field(default_factory=dict)
    tracked: dict[int, FrameOutput] = field(default_factory=dict)
    pending: dict[int, tuple[FrameOutput, bool]] = field(default_factory=dict)  # -> prompted?
    rebuilt: dict[int, FrameOutput] = field(default_factory=dict)  # from recalled masks
    restored: dict[int, Restored] = field(default_factory=dict)  # shown as given back

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
        # the masks kept elsewhere for a frame (VideoState.recall); set: keep only what is in
        # reach, and rebuild what is missing from them
        self.recall: Callable[[int], dict[int, np.ndarray]] | None = None
        self.pass_start: int | None = None  # the frame the propagation under way set out from

    def _track_of(self, object_id: int) -> ObjectTrack:
        track = self.tracks.get(object_id)
        if track is None:
            track = self.tracks[object_id] = ObjectTrack(np.zeros(self.frame_count, np.int8))
        return track

    # Prompts.
    def add_clicks(
        self, frame: int, object_id: int, points: np.ndarray, labels: np.ndarray
    ) -> None:
        """Segment ``object_id`` on ``frame`` from ``points`` (``N x 2``, pixels of the model's
        input) and ``labels``; replaces the object's earlier clicks there."""
        device = self.model.device
        track = self._track_of(object_id)
        coords, kinds = self._clicks(points, labels)
        track.clicks[frame] = (coords, kinds)
        first = track.directions[frame] == UNTRACKED
        prompted = first or self.corrections_as_prompts
        if frame in track.restored or (track.restored and not first):
            self._build_restored(track)
        track.restored.pop(frame, None)
        previous = track.output(frame)
        mask_prompt = None
        if previous is not None:
            mask_prompt = previous.mask_logits.to(device)
        elif not first and self.recall is not None:  # dropped: the mask as shown instead
            recalled = self._model_mask(self._recalled(frame, {})[object_id])
            mask_prompt = self.model.mask_logits(recalled)
        if mask_prompt is not None:
            mask_prompt = mask_prompt.clamp(-PROMPT_MASK_LIMIT, PROMPT_MASK_LIMIT)
        if first:
            context = _Context([], [])
        else:
            reverse = track.directions[frame] == REVERSE
            self._rebuild(frame, [(object_id, track)], reverse=reverse)
            context = self._context(track, frame, reverse=reverse)
            if self.recall is not None:  # what earlier corrections rebuilt, say
                self._forget(track, frame, reverse=reverse)
        features = self.features(frame)
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
        track = self._track_of(object_id)
        track.clicks.pop(frame, None)
        track.restored.pop(frame, None)
        prompted = track.directions[frame] == UNTRACKED or self.corrections_as_prompts
        result = self.model.mask_as_result(self.features(frame), self._model_mask(mask))
        output = FrameOutput(
            self._fill_holes(result.mask_logits), result.object_pointer, result.object_score
        )
        track.pending[frame] = (self._stored(output), prompted)

    def restore(
        self,
        frame: int,
        object_id: int,
        points: np.ndarray | None,
        labels: np.ndarray | None,
        mask: np.ndarray,
    ) -> None:
        """``object_id``'s anchor on ``frame`` given back, without running the model: its
        clicks (``points`` in pixels of the model's input and ``labels``; None for a given mask)
        and its mask as last shown (``H x W``, bool), which the frame shows until the anchor
        changes. It becomes a conditioning frame when a propagation or a correction first needs
        it (:meth:`_build_restored`)."""
        track = self._track_of(object_id)
        clicks = None if points is None or labels is None else self._clicks(points, labels)
        track.pending.pop(frame, None)
        track.prompted.pop(frame, None)
        track.clicks.pop(frame, None)
        if clicks is not None:
            track.clicks[frame] = clicks
        mask = np.asarray(mask, bool)
        track.restored[frame] = Restored(np.packbits(mask), mask.shape, clicks)

    def clear_clicks(self, frame: int, object_id: int) -> None:
        track = self.tracks.get(object_id)
        if track is None:
            return
        track.clicks.pop(frame, None)
        track.pending.pop(frame, None)
        track.restored.pop(frame, None)
        output = track.prompted.pop(frame, None)
        if output is not None:  # its last result stays, as a tracked frame
            track.tracked[frame] = output
            track.directions[frame] = UNTRACKED

    def remove(self, object_id: int) -> None:
        self.tracks.pop(object_id, None)

    def reset(self) -> None:
        self.tracks.clear()

    def logits(self, frame: int) -> dict[int, Result]:
        """Every object's current result on ``frame``: its mask logits, or the mask as shown
        where the logits are not held (a restored anchor, or a result dropped or never made
        here, recalled), or ``None`` where it has no result."""
        results: dict[int, Result] = {}
        recalled: dict[int, dict[int, np.ndarray | None]] = {}
        for object_id, track in self.tracks.items():
            restored = track.restored.get(frame)
            output = track.output(frame)
            if restored is not None:
                results[object_id] = restored.mask
            elif output is not None:
                results[object_id] = output.mask_logits
            elif self.recall is not None:
                # dropped, or never tracked by this state (one given its work back): as shown
                results[object_id] = self._recalled(frame, recalled)[object_id]
            else:
                results[object_id] = None
        return results

    # Propagation.
    def prepare(self, start: int | None = None) -> None:
        """Before a pass from ``start``: encode the memories of the frames clicked since the
        last one, and of the restored anchors, and move them into the memory bank."""
        self.pass_start = start
        for track in self.tracks.values():
            self._build_restored(track)
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

    def track(self, frame: int, *, reverse: bool) -> dict[int, Result]:
        """Every object's mask logits on ``frame``, tracked from its memories (prompted frames
        keep their clicked result; a restored one, its mask as shown)."""
        results: dict[int, Result] = {}
        groups: dict[tuple, list[tuple[int, ObjectTrack, _Context]]] = {}
        moving = [(i, t) for i, t in self.tracks.items() if t.prompted and frame not in t.prompted]
        self._rebuild(frame, moving, reverse=reverse)
        for object_id, track in self.tracks.items():
            if not track.prompted:
                results[object_id] = None
                continue
            track.directions[frame] = REVERSE if reverse else FORWARD
            if frame in track.prompted:
                restored = track.restored.get(frame)
                shown = track.prompted[frame].mask_logits if restored is None else restored.mask
                results[object_id] = shown
                continue
            context = self._context(track, frame, reverse=reverse)
            groups.setdefault(context.layout, []).append((object_id, track, context))
        for members in groups.values():
            self._track_batch(frame, members)
            for object_id, track, _ in members:
                results[object_id] = track.tracked[frame].mask_logits
                if self.offload and self.recall is None:
                    self._offload(track, frame - self.reach if not reverse else frame + self.reach)
        if self.recall is not None:
            for track in self.tracks.values():
                self._forget(track, frame, reverse=reverse)
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
            track.rebuilt.pop(frame, None)
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
            output = self._behind(track, frame - step * (slots - slot))
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
            output = self._behind(track, t)
            if output is not None:
                pointers.append((distance, output.pointer))
        return _Context(
            [(slot, memory.to(device, non_blocking=True)) for slot, memory in memories],
            [(distance, pointer.to(device, non_blocking=True)) for distance, pointer in pointers],
        )

    @staticmethod
    def _behind(track: ObjectTrack, frame: int) -> FrameOutput | None:
        """The output of a tracked frame another frame attends to: tracked, or rebuilt."""
        output = track.tracked.get(frame)
        return output if output is not None else track.rebuilt.get(frame)

    # Flat memory: what is dropped, and made again from recalled masks.
    def _forget(self, track: ObjectTrack, frame: int, *, reverse: bool) -> None:
        """Drop the object's tracked and rebuilt outputs that the frames after ``frame`` (in
        the direction of travel) cannot reach, but for those within reach of the pass's start."""
        step = -1 if reverse else 1
        start = self.pass_start
        for outputs in (track.tracked, track.rebuilt):
            gone = [
                t
                for t in outputs
                if not 0 <= (frame - t) * step < self.reach
                and (start is None or abs(t - start) > self.reach)
            ]
            for t in gone:
                del outputs[t]

    def _rebuild(
        self, frame: int, members: list[tuple[int, ObjectTrack]], *, reverse: bool
    ) -> None:
        """Make again, from recalled masks, the outputs of the tracked frames within reach
        behind ``frame`` that ``members`` (object ID, track) attend to and no longer hold."""
        if self.recall is None or not members:
            return
        step = -1 if reverse else 1
        recalled: dict[int, dict[int, np.ndarray | None]] = {}
        for distance in range(1, self.reach):
            t = frame - step * distance
            if not 0 <= t < self.frame_count:
                break
            for object_id, track in members:
                held = t in track.tracked or t in track.rebuilt or t in track.prompted
                if held or t in track.pending or track.directions[t] == UNTRACKED:
                    continue
                mask = self._recalled(t, recalled)[object_id]
                track.rebuilt[t] = self._given_output(t, self._model_mask(mask), None)
            recalled.pop(t, None)

    def _build_restored(self, track: ObjectTrack) -> None:
        """Make the restored anchors that are not yet conditioning frames into ones."""
        for frame, restored in track.restored.items():
            if frame in track.prompted:
                continue
            given = self._model_mask(restored.mask)
            track.prompted[frame] = self._given_output(frame, given, restored.clicks)
            track.tracked.pop(frame, None)
            track.rebuilt.pop(frame, None)

    def _given_output(
        self,
        frame: int,
        given: torch.Tensor,
        clicks: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> FrameOutput:
        """A frame's output made from a mask (``1 x 1 x S x S``) as a given mask's is, with
        its memory; with ``clicks``, the object pointer decoded from them with the mask as the
        mask prompt (on the frame's features, no memory)."""
        features = self.features(frame)
        result = self.model.mask_as_result(features, given)
        logits = self._fill_holes(result.mask_logits)
        pointer = result.object_pointer
        if clicks is not None:
            coords, kinds = clicks
            conditioned = self.model.condition(features, [], [], self.pointer_span)
            prompt = logits.clamp(-PROMPT_MASK_LIMIT, PROMPT_MASK_LIMIT)
            decoded = self.model.segment(
                conditioned, features, coords, kinds, prompt, multimask=coords.shape[1] <= 1
            )
            pointer = decoded.object_pointer
        memory = self.model.encode_memory(features, logits, result.object_score, from_clicks=True)
        output = FrameOutput(logits, pointer, result.object_score)
        output = self._stored(output)
        output.memory = memory.to(torch.bfloat16).to(self.storage)
        return output

    def _recalled(
        self, frame: int, recalled: dict[int, dict[int, np.ndarray | None]]
    ) -> dict[int, np.ndarray | None]:
        """Every object's mask on ``frame`` as ``recall`` keeps it (None: it keeps none),
        asked for once per frame in ``recalled``."""
        if frame not in recalled:
            masks = self.recall(frame) if self.recall is not None else {}
            recalled[frame] = {
                object_id: np.asarray(masks[object_id], bool) if object_id in masks else None
                for object_id in self.tracks
            }
        return recalled[frame]

    def _model_mask(self, mask: torch.Tensor | np.ndarray | None) -> torch.Tensor:
        """A mask (``H x W``, any size; None: empty) as the model takes it: ``1 x 1 x S x S``,
        0 or 1."""
        size = self.model.config.image_size
        if mask is None:
            return torch.zeros(1, 1, size, size, device=self.model.device)
        if isinstance(mask, np.ndarray):
            mask = torch.from_numpy(np.ascontiguousarray(mask))
        given = mask.to(self.model.device, torch.float32)[None, None]
        if given.shape[-2:] != (size, size):
            given = F.interpolate(
                given, (size, size), mode="bilinear", align_corners=False, antialias=True
            )
            given = (given >= 0.5).float()
        return given

    def _clicks(self, points: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        device = self.model.device
        coords = torch.as_tensor(points, dtype=torch.float32, device=device)[None]
        kinds = torch.as_tensor(labels, dtype=torch.int32, device=device)[None]
        return coords, kinds

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
