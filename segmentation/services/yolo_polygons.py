"""Annotations as YOLO segmentation labels (Ultralytics' format): a ZIP of ``labels/NNNNN.txt``,
one per frame of the video (empty where it has no mask, a background image to YOLO), with a
``classes.txt`` and a ``data.yaml`` naming the classes.

Each object is a class of its own, ``object_<id>``, numbered from 0 in the order of the object
IDs. A label line is one connected part of an object's mask: ``class x1 y1 x2 y2 ...``, the
outline of the part (OpenCV's ``findContours``, the part's largest external contour, its holes
left filled) through the centres of its edge pixels, divided by the frame's width and height.
A part thinner than a polygon (a single pixel, a one-pixel line) has no line: it encloses no
area, and YOLO's loaders drop such polygons.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator

import cv2
import numpy as np

from core.threads import Stopped
from segmentation.rle import rle_decode
from segmentation.video_shape import VideoShape
from segmentation.zip_stream import DEFLATED, ZipStream

SMALLEST_POLYGON = 3  # points


def yolo_labels_build(
    *, video: VideoShape, data: dict, stop: threading.Event | None = None
) -> tuple[str, bytes]:
    """The archive's file name and bytes for annotations in the export format, checked against
    their ``video`` (``annotations_check``). Raises :class:`Stopped` between frames once
    ``stop`` is set."""
    by_frame = {frame["frame_index"]: frame["objects"] for frame in data["frames"]}
    object_ids = {item["object_id"] for objects in by_frame.values() for item in objects}
    frames = ({"frame_index": i, "objects": by_frame[i]} for i in sorted(by_frame))
    parts = []
    for part in yolo_labels_chunks(video=video, frames=frames, object_ids=object_ids):
        if stop is not None and stop.is_set():
            raise Stopped
        parts.append(part)
    return yolo_labels_name(video), b"".join(parts)


def yolo_labels_name(video: VideoShape) -> str:
    return video.export_name(suffix="-yolo.zip")


def yolo_labels_chunks(
    *, video: VideoShape, frames: Iterable[dict], object_ids: Iterable[int]
) -> Iterator[bytes]:
    """The archive, a frame's labels at a time, for ``frames`` in the export format in the
    order of their indices, every frame once at most, ``object_ids`` naming every object among
    them. Memory does not grow with the frames (``zip_stream.py``)."""
    ordered = sorted(set(object_ids))
    class_of = {object_id: index for index, object_id in enumerate(ordered)}
    names = [f"object_{object_id}" for object_id in ordered]
    size = np.array([video.width, video.height], np.float64)
    archive = ZipStream(compression=DEFLATED)
    next_index = 0
    for frame in itertools.chain(frames, [{"frame_index": video.frame_count, "objects": []}]):
        for frame_index in range(next_index, min(frame["frame_index"], video.frame_count)):
            yield archive.add(f"labels/{frame_index:05d}.txt", "")
        frame_index = frame["frame_index"]
        if frame_index >= video.frame_count:
            break
        lines = []
        for item in frame["objects"]:
            for polygon in mask_polygons(mask=rle_decode(item["mask"])):
                numbers = " ".join(map("{:.6f}".format, (polygon / size).ravel().tolist()))
                lines.append(f"{class_of[item['object_id']]} {numbers}\n")
        yield archive.add(f"labels/{frame_index:05d}.txt", "".join(lines))
        next_index = frame_index + 1
    yield archive.add("classes.txt", "".join(f"{name}\n" for name in names))
    yield archive.add("data.yaml", _data_yaml(names))
    yield archive.close()


def mask_polygons(*, mask: np.ndarray) -> list[np.ndarray]:
    """One N x 2 array of (x, y) pixel coordinates per connected part of a boolean mask (8-
    connected, as ``findContours`` follows edges), in the order of the parts' first pixels.

    One ``findContours`` over the whole mask: its two-level hierarchy puts every part's outer
    edge at the top, a part in another's hole too, and the holes' edges below them (``h[3]``,
    the parent, is -1 at the top). Each part was labelled and traced alone in its box before:
    the same outlines, but the labelling alone took 2.7 ms a mask at 854 x 480, where this
    takes 0.3 (issue 48)."""
    contours, hierarchy = cv2.findContours(
        mask.astype(np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE
    )
    if hierarchy is None:  # no part at all
        return []
    # An outline starts at its part's first pixel (the border is followed from where the scan
    # of the rows met it), which orders the parts.
    outer = [c.reshape(-1, 2) for c, h in zip(contours, hierarchy[0], strict=True) if h[3] < 0]
    outer.sort(key=lambda outline: (outline[0, 1], outline[0, 0]))
    return [outline for outline in outer if len(outline) >= SMALLEST_POLYGON]


def _data_yaml(names: list[str]) -> str:
    lines = [
        "# YOLO segmentation labels from the segmentation service. Put the video's frames in",
        "# images/ beside labels/ as NNNNN.jpg (GET /frames/<index>.jpg?video=<path> serves",
        "# each), then train or validate on them.",
        "path: .",
        "train: images",
        "val: images",
        f"nc: {len(names)}",
        "names:",
        *(f"  {index}: {name}" for index, name in enumerate(names)),
    ]
    return "\n".join(lines) + "\n"
