"""Annotations as a COCO instances file (the ``instances_*.json`` of COCO detection), the format
detection and segmentation tools read.

- ``images``: one per frame of the video, frames without masks included; ``id`` is the frame
  index plus one (COCO's tools take 0 for "none" in places) and ``file_name`` the frame's
  ``NNNNN.jpg``, as ``/frames/<index>.jpg`` serves it.
- ``categories``: one per object, ``object_<id>``, numbered from 1 in the order of the object IDs.
- ``annotations``: one per object and frame whose mask is not empty. The mask is the export's
  own COCO RLE, so pycocotools' ``annToMask`` gives it back pixel for pixel (polygons would
  not); ``area`` and ``bbox`` are pycocotools'. ``iscrowd`` is 0: each is one object, which
  COCO's evaluation then matches rather than ignores (pycocotools reads an RLE either way).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator

from pycocotools import mask as coco_mask

from core.threads import Stopped
from segmentation.video_shape import VideoShape

IMAGES_AT_ONCE = 1000  # images written in one piece of the stream


def coco_instances_build(
    *, video: VideoShape, data: dict, stop: threading.Event | None = None
) -> tuple[str, bytes]:
    """The file's name and bytes for annotations in the export format, checked against their
    ``video`` (``annotations_check``). Raises :class:`Stopped` between frames once ``stop`` is
    set."""
    frames = sorted(data["frames"], key=lambda frame: frame["frame_index"])
    object_ids = {item["object_id"] for frame in frames for item in frame["objects"]}
    parts = []
    for part in coco_instances_chunks(video=video, frames=frames, object_ids=object_ids):
        if stop is not None and stop.is_set():
            raise Stopped
        parts.append(part)
    return coco_instances_name(video), b"".join(parts)


def coco_instances_name(video: VideoShape) -> str:
    return video.export_name(suffix="-coco.json")


def coco_instances_chunks(
    *, video: VideoShape, frames: Iterable[dict], object_ids: Iterable[int]
) -> Iterator[bytes]:
    """The file, a piece at a time (the images in batches, then a frame's annotations at a
    time), for ``frames`` in the export format in the order of their indices, ``object_ids``
    naming every object among them: the bytes of the whole file made at once as compact JSON,
    with memory that does not grow with the frames."""
    category_of = {
        object_id: number for number, object_id in enumerate(sorted(set(object_ids)), start=1)
    }
    info = {"description": f"{video.name}: masks from the segmentation service"}
    yield f'{{"info":{_json(info)},"images":['.encode()
    for first in range(0, video.frame_count, IMAGES_AT_ONCE):
        images = [
            {
                "id": index + 1,
                "file_name": f"{index:05d}.jpg",
                "width": video.width,
                "height": video.height,
            }
            for index in range(first, min(first + IMAGES_AT_ONCE, video.frame_count))
        ]
        yield ("," if first else "").encode() + _json(images)[1:-1].encode()
    categories = [
        {"id": number, "name": f"object_{object_id}", "supercategory": "object"}
        for object_id, number in category_of.items()
    ]
    yield f'],"categories":{_json(categories)},"annotations":['.encode()
    count = 0
    for frame in frames:
        annotations = []
        for item in frame["objects"]:
            rle = {"size": item["mask"]["size"], "counts": item["mask"]["counts"].encode()}
            area = int(coco_mask.area(rle))
            if area == 0:  # an object absent from the frame is no instance of it
                continue
            count += 1
            annotations.append(
                {
                    "id": count,
                    "image_id": frame["frame_index"] + 1,
                    "category_id": category_of[item["object_id"]],
                    "segmentation": item["mask"],
                    "area": area,
                    "bbox": [float(n) for n in coco_mask.toBbox(rle)],
                    "iscrowd": 0,
                }
            )
        if annotations:
            comma = "," if count > len(annotations) else ""
            yield (comma + _json(annotations)[1:-1]).encode()
    yield b"]}"


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))
