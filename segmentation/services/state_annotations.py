"""Annotations and a session's engine state, each made from the other: the frames an export
holds (non-empty masks, and each clicked object's mask with its clicks, normalized back as the
API sends them), and an imported object given back to the state as a prompt (its clicks again,
or its mask)."""

from __future__ import annotations

import dataclasses

import numpy as np

from segmentation.engines.base import Prompt, VideoState
from segmentation.errors import BadUserInput
from segmentation.rle import rle_decode
from segmentation.services.session_types import FrameMasks, ObjectMask


def frame_annotated(*, state: VideoState, frame_index: int) -> FrameMasks:
    """The frame as an export has it: its non-empty masks and its clicked objects' masks, with
    their clicks."""
    clicked = {
        object_id: prompts[frame_index]
        for object_id, prompts in state.prompts.items()
        if frame_index in prompts
    }
    masks = state.masks(frame_index=frame_index)
    frame = FrameMasks.from_masks(
        frame_index, {i: mask for i, mask in masks.items() if mask.any() or i in clicked}
    )
    objects = tuple(
        _with_clicks(item, clicked[item.object_id], state) if item.object_id in clicked else item
        for item in frame.objects
    )
    return dataclasses.replace(frame, objects=objects)


def _with_clicks(item: ObjectMask, prompt: Prompt, state: VideoState) -> ObjectMask:
    # The engine keeps clicks in pixels, scaled from [0, 1] by (width - 1, height - 1)
    # (VideoState._prompt): normalized back the same way, they give the same pixels again.
    size = np.array([max(state.frames.width - 1, 1), max(state.frames.height - 1, 1)], float)
    points = (prompt.points / size).tolist()
    return dataclasses.replace(item, points=points, labels=[int(n) for n in prompt.labels])


def object_import(*, state: VideoState, frame_index: int, item: ObjectMask) -> None:
    """Give the engine state an imported object on a frame: its clicks again where it has them,
    else its mask as a prompt."""
    if item.points is not None:
        state.add_points(
            frame_index=frame_index,
            object_id=item.object_id,
            points=item.points,
            labels=item.labels or [],
            clear_old_points=True,
        )
        return
    try:
        mask = rle_decode(item.rle)
    except ValueError as error:
        raise BadUserInput(f"frame {frame_index}, object {item.object_id}: {error}") from None
    state.give_mask(frame_index=frame_index, object_id=item.object_id, mask=mask)
