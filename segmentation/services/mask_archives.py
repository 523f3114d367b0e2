"""Annotations as a ZIP of per-frame label PNGs in the DAVIS layout.

The archive holds ``<video name>/00000.png`` ... for every frame of the video, frames without
masks included (all background), as DAVIS does; a pixel's value is the ID of the object covering
it. Where masks overlap, the object listed last on that frame wins.
"""

from __future__ import annotations

import io
import threading
import zipfile

import numpy as np

from core.threads import Stopped
from segmentation.davis_png import labels_png_write
from segmentation.errors import BadUserInput
from segmentation.rle import rle_decode
from segmentation.video_shape import VideoShape

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
    name = video.export_name(suffix="")
    buffer = io.BytesIO()
    # PNG is compressed already: the archive only stores it.
    empty = _png(np.zeros((video.height, video.width), np.uint8))
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for frame_index in range(video.frame_count):
            if stop is not None and stop.is_set():
                raise Stopped
            objects = by_frame.get(frame_index)
            png = empty
            if objects:
                labels = np.zeros((video.height, video.width), np.uint8)
                for item in objects:
                    labels[rle_decode(item["mask"])] = item["object_id"]
                png = _png(labels)
            archive.writestr(f"{name}/{frame_index:05d}.png", png)
    return f"{name}-masks.zip", buffer.getvalue()


def _png(labels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    labels_png_write(labels, buffer)
    return buffer.getvalue()
