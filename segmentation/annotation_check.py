"""An annotation file's frames checked against the video they are of: every frame index within
it and once, every object ID a GraphQL Int, every mask an RLE of its size, every click as
``addPoints`` takes it. Without the database: the exports run it in a process that has none
(``segmentation/services/exports.py``); ``services/uploads.py``'s ``annotations_check`` finds
the video first."""

from __future__ import annotations

import math
import threading

import numpy as np

from core.threads import Stopped
from segmentation.engines.base import BOX_LABELS, MAX_POINTS, PromptError, box_check
from segmentation.errors import BadUserInput
from segmentation.rle import rle_decode
from segmentation.video_shape import VideoShape

# The API's object IDs are GraphQL Ints, 32-bit signed: an imported ID past that could never be
# answered (graphql-core refuses to serialize it).
LARGEST_OBJECT_ID = 2**31 - 1


def frames_check(data: dict, *, video: VideoShape, stop: threading.Event | None = None) -> None:
    """:class:`BadUserInput` naming the first fault of ``data``'s frames; :class:`Stopped`
    between masks once ``stop`` is set (the client went away): a file of 8 MB holds a few dozen
    masks of isolated pixels, each some milliseconds to read."""
    frames = data.get("frames")
    if not isinstance(frames, list):
        raise BadUserInput("annotations need a list of frames")
    seen: set[int] = set()
    for position, frame in enumerate(frames):
        where = f"frames[{position}]"
        if not isinstance(frame, dict) or not isinstance(frame.get("objects"), list):
            raise BadUserInput(f'{where} must be {{"frame_index": <int>, "objects": [...]}}')
        index = frame.get("frame_index")
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not 0 <= index < video.frame_count
        ):
            raise BadUserInput(
                f"{where}.frame_index must be within 0..{video.frame_count - 1}, got {index!r}"
            )
        if index in seen:
            raise BadUserInput(f"{where}: frame {index} appears twice")
        seen.add(index)
        for number, item in enumerate(frame["objects"]):
            if stop is not None and stop.is_set():
                raise Stopped
            _check_object(item, f"{where}.objects[{number}]", video)


def _check_object(item: object, where: str, video: VideoShape) -> None:
    if not isinstance(item, dict):
        raise BadUserInput(f'{where} must be {{"object_id": <int>, "mask": {{...}}}}')
    object_id = item.get("object_id")
    if (
        isinstance(object_id, bool)
        or not isinstance(object_id, int)
        or not 0 <= object_id <= LARGEST_OBJECT_ID
    ):
        raise BadUserInput(
            f"{where}.object_id must be an integer within 0..{LARGEST_OBJECT_ID} "
            f"(GraphQL's Int), got {object_id!r}"
        )
    mask = item.get("mask")
    size = mask.get("size") if isinstance(mask, dict) else None
    if size != [video.height, video.width]:
        raise BadUserInput(
            f"{where}.mask.size must be the video's [{video.height}, {video.width}], got {size!r}"
        )
    try:
        rle_decode(mask)
    except ValueError as error:
        raise BadUserInput(f"{where}.mask: {error}") from None
    if "points" in item or "labels" in item:
        _check_clicks(item.get("points"), item.get("labels"), where)


def _check_clicks(points: object, labels: object, where: str) -> None:
    """An object's clicks on a frame, as ``addPoints`` takes them: an import sends them again."""
    if not isinstance(points, list) or not isinstance(labels, list) or not points:
        raise BadUserInput(f"{where} needs both points and labels, lists of at least one click")
    if len(points) != len(labels) or len(points) > MAX_POINTS:
        raise BadUserInput(
            f"{where}.points and labels must have the same length, at most {MAX_POINTS}"
        )
    for point in points:
        if not isinstance(point, list) or len(point) != 2 or not all(_unit(n) for n in point):
            raise BadUserInput(f"{where}.points must be [x, y] pairs within [0, 1]")
    if any(isinstance(label, bool) or label not in (0, 1, *BOX_LABELS) for label in labels):
        raise BadUserInput(
            f"{where}.labels must be 1 (positive), 0 (negative), 2 (box top-left) "
            "or 3 (box bottom-right)"
        )
    if any(label in BOX_LABELS for label in labels):
        # checked here as addPoints checks it, so that a bad box changes nothing
        try:
            box_check(np.asarray(points, np.float64), np.asarray(labels, np.int8))
        except PromptError as error:
            raise BadUserInput(f"{where}: {error}") from None


def _unit(number: object) -> bool:
    return (
        isinstance(number, int | float)
        and not isinstance(number, bool)
        and math.isfinite(number)
        and 0 <= number <= 1
    )
