"""Annotations as a ZIP of per-frame label PNGs in the DAVIS layout.

The archive holds ``<video name>/00000.png`` ... for every frame of the video, frames without
masks included (all background), as DAVIS does; a pixel's value is the ID of the object covering
it. Where masks overlap, the object listed last on that frame wins.
"""

from __future__ import annotations

import io
import itertools
import threading
from collections.abc import Iterable, Iterator

import numpy as np

from core.threads import Stopped
from segmentation.davis_png import labels_png_write
from segmentation.errors import BadUserInput
from segmentation.rle import rle_decode
from segmentation.video_shape import VideoShape
from segmentation.zip_stream import STORED, ZipStream

LARGEST_OBJECT_ID = 255  # one byte per pixel


def mask_archive_build(
    *, video: VideoShape, data: dict, stop: threading.Event | None = None
) -> tuple[str, bytes]:
    """The archive's file name and bytes for annotations in the export format, checked against
    their ``video`` (``annotations_check``); :class:`BadUserInput` for an object ID no label
    PNG holds. Raises :class:`Stopped` between frames once ``stop`` is set."""
    by_frame = {frame["frame_index"]: frame["objects"] for frame in data["frames"]}
    for frame_index, objects in sorted(by_frame.items()):
        for item in objects:
            if not 1 <= item["object_id"] <= LARGEST_OBJECT_ID:
                raise BadUserInput(
                    f"frame {frame_index}: object ID {item['object_id']} cannot be a pixel value "
                    f"of a label PNG (1..{LARGEST_OBJECT_ID})"
                )
    object_ids = {item["object_id"] for objects in by_frame.values() for item in objects}
    frames = ({"frame_index": i, "objects": by_frame[i]} for i in sorted(by_frame))
    parts = []
    for part in mask_archive_chunks(video=video, frames=frames, object_ids=object_ids):
        if stop is not None and stop.is_set():
            raise Stopped
        parts.append(part)
    return mask_archive_name(video), b"".join(parts)


def mask_archive_name(video: VideoShape) -> str:
    return video.export_name(suffix="-masks.zip")


def mask_archive_chunks(
    *, video: VideoShape, frames: Iterable[dict], object_ids: Iterable[int]
) -> Iterator[bytes]:
    """The archive, a frame's PNG at a time, for ``frames`` in the export format in the order of
    their indices, every frame once at most, ``object_ids`` naming every object among them:
    :class:`BadUserInput` for one that no label PNG holds, before anything is written. Memory
    does not grow with the frames (``zip_stream.py``)."""
    objects_check(object_ids)
    name = video.export_name(suffix="")
    # PNG is compressed already: the archive only stores it.
    archive = ZipStream(compression=STORED)
    empty = _png(np.zeros((video.height, video.width), np.uint8))
    next_index = 0
    for frame in itertools.chain(frames, [{"frame_index": video.frame_count, "objects": []}]):
        for frame_index in range(next_index, min(frame["frame_index"], video.frame_count)):
            yield archive.add(f"{name}/{frame_index:05d}.png", empty)
        frame_index, objects = frame["frame_index"], frame["objects"]
        if frame_index >= video.frame_count:
            break
        png = empty
        if objects:
            labels = np.zeros((video.height, video.width), np.uint8)
            for item in objects:
                labels[rle_decode(item["mask"])] = item["object_id"]
            png = _png(labels)
        yield archive.add(f"{name}/{frame_index:05d}.png", png)
        next_index = frame_index + 1
    yield archive.close()


def objects_check(object_ids: Iterable[int]) -> None:
    """:class:`BadUserInput` for the first object ID that no label PNG holds."""
    for object_id in sorted(object_ids):
        if not 1 <= object_id <= LARGEST_OBJECT_ID:
            raise BadUserInput(
                f"object ID {object_id} cannot be a pixel value of a label PNG "
                f"(1..{LARGEST_OBJECT_ID})"
            )


def _png(labels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    labels_png_write(labels, buffer)
    return buffer.getvalue()
