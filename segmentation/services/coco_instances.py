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

from pycocotools import mask as coco_mask

from core.threads import Stopped
from segmentation.video_shape import VideoShape


def coco_instances_build(
    *, video: VideoShape, data: dict, stop: threading.Event | None = None
) -> tuple[str, bytes]:
    """The file's name and bytes for annotations in the export format, checked against their
    ``video`` (``annotations_check``). Raises :class:`Stopped` between frames once ``stop`` is
    set."""
    frames = sorted(data["frames"], key=lambda frame: frame["frame_index"])
    object_ids = sorted({item["object_id"] for frame in frames for item in frame["objects"]})
    category_of = {object_id: number for number, object_id in enumerate(object_ids, start=1)}
    annotations = []
    for frame in frames:
        if stop is not None and stop.is_set():
            raise Stopped
        for item in frame["objects"]:
            rle = {"size": item["mask"]["size"], "counts": item["mask"]["counts"].encode()}
            area = int(coco_mask.area(rle))
            if area == 0:  # an object absent from the frame is no instance of it
                continue
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": frame["frame_index"] + 1,
                    "category_id": category_of[item["object_id"]],
                    "segmentation": item["mask"],
                    "area": area,
                    "bbox": [float(n) for n in coco_mask.toBbox(rle)],
                    "iscrowd": 0,
                }
            )
    instances = {
        "info": {"description": f"{video.name}: masks from the segmentation service"},
        "images": [
            {
                "id": index + 1,
                "file_name": f"{index:05d}.jpg",
                "width": video.width,
                "height": video.height,
            }
            for index in range(video.frame_count)
        ],
        "categories": [
            {"id": number, "name": f"object_{object_id}", "supercategory": "object"}
            for object_id, number in category_of.items()
        ],
        "annotations": annotations,
    }
    content = json.dumps(instances, separators=(",", ":")).encode()
    return video.export_name(suffix="-coco.json"), content
