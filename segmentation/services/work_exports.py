"""The exports of a session that keeps its work (``work_store.py``), read from the store and
streamed: the annotation file, and the DAVIS label PNGs, COCO instances and YOLO labels it
converts to, each written a frame at a time, so that an hour of masks (86,400 frames) never
sits in memory whole, in the server or anywhere else.

- The store is read a few thousand rows at a time (``selectors.work_frames``, ``work_clicks``),
  the masks and the clicks merged frame by frame into the annotation file's frames: the same
  frames as the session's engine state gives (``state_annotations.py``: each frame with a mask,
  a clicked object with its clicks normalized back and its mask, empty or not).
- The annotation file is written as JSON in a thread of the server's process, where it is made
  today: a frame's JSON is little work beside its reading, and what the thread holds is a piece
  of the answer.
- The conversions run in the export processes (``exports.py``): decoding, drawing and tracing
  every frame's masks is what made them seconds of the interpreter's work a file, which the
  server's event loop must not wait behind (issue 47). Each is a stream of its export process
  (``core/processes.py``, ``ProcessPool.stream``): a thread of the server reads the store and
  feeds the frames to the process, which converts them a frame at a time (``zip_stream.py``
  writes each ZIP member as it comes, COCO's JSON a piece at a time) and sends each piece back
  to be answered as it comes. So they keep the POSTed conversions' guarantees:
  ``EXPORT_PROCESSES`` at once, a line of ``EXPORTS_QUEUED`` and ``SERVER_BUSY`` past it, at a
  lower priority than the server's, the process killed when the client hangs up.

  The process is fed rather than reading the store itself: it imports no Django (it starts fast
  and small, and stays out of the database's connections), and the store's reads are the
  server's own selectors. It answers as it goes rather than into a file streamed afterwards:
  the first bytes leave at once, nothing of an hour's export is kept on disk, and as the
  socket between them holds little, a client that reads slowly pauses the process, which
  pauses the feeding, which pauses the reading.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from django.db import connections

from core.turns import NoTurn
from segmentation.rle import rle_encode
from segmentation.selectors import (
    work_clicks,
    work_frames,
    work_masks_size,
    work_object_ids,
    work_video,
)
from segmentation.services.coco_instances import coco_instances_chunks, coco_instances_name
from segmentation.services.exports import export_processes, export_stream, exports_busy
from segmentation.services.mask_archives import mask_archive_chunks, mask_archive_name
from segmentation.services.sessions import session_work
from segmentation.services.yolo_polygons import yolo_labels_chunks, yolo_labels_name
from segmentation.video_shape import VideoShape

PIECE_BYTES = 64 * 1024  # the annotation file's frames are answered in pieces of about this


@dataclass(frozen=True)
class WorkExport:
    """What an export of a session's work reads: the work, and its video."""

    work_id: int
    video_path: str
    video: VideoShape


@dataclass(frozen=True)
class Conversion:
    """A format the stored work converts to: its pieces, made in an export process
    (``chunks(video=, frames=, object_ids=)``), its file name and its content type."""

    chunks: Callable[..., Iterator[bytes]]
    name: Callable[[VideoShape], str]
    content_type: str


MASKS = Conversion(mask_archive_chunks, mask_archive_name, "application/zip")
COCO = Conversion(coco_instances_chunks, coco_instances_name, "application/json")
YOLO = Conversion(yolo_labels_chunks, yolo_labels_name, "application/zip")


def work_export_of(*, session_id: str) -> WorkExport | None:
    """What an export of the session's work reads; None for a session that keeps none.
    :class:`SessionNotFound` for an unknown session."""
    work_id = session_work(session_id=session_id)
    if work_id is None:
        return None
    video = work_video(work_id=work_id)
    return WorkExport(work_id=work_id, video_path=video.path, video=video.shape)


def work_export_size(*, export: WorkExport) -> int:
    """The bytes of RLE an export of the work reads, which it is charged by."""
    return work_masks_size(work_id=export.work_id)


def work_annotation_frames(
    *, export: WorkExport, only: frozenset[int] | None = None
) -> Iterator[dict]:
    """Each frame of the work with a mask or a click, in order, in the annotation file's
    format: its objects by ID, each with its mask (an empty one for a clicked object that has
    none there) and, where it was clicked, its clicks normalized as the API takes them. With
    ``only``, those objects alone (a conversion names its objects before its frames, and
    the work may change while it is read: an object added meanwhile is left out).

    Read in the calling thread, whose database connection is closed at the end."""
    height, width = export.video.height, export.video.width
    # The engine keeps clicks in pixels, scaled from [0, 1] by (width - 1, height - 1): divided
    # the same way (state_annotations.py), they are the session's export's numbers exactly.
    scale = np.array([max(width - 1, 1), max(height - 1, 1)], float)
    empty = rle_encode(np.zeros((height, width), bool))
    try:
        masks = work_frames(work_id=export.work_id)
        clicks = work_clicks(work_id=export.work_id)
        masked = next(masks, None)
        clicked = next(clicks, None)
        while masked is not None or clicked is not None:
            frame_index = min(
                masked[0] if masked is not None else float("inf"),
                clicked[0] if clicked is not None else float("inf"),
            )
            counts: dict[int, str] = {}
            if masked is not None and masked[0] == frame_index:
                counts = masked[1]
                masked = next(masks, None)
            prompts: dict[int, tuple[list, list]] = {}
            while clicked is not None and clicked[0] == frame_index:
                prompts[clicked[1]] = (clicked[2], clicked[3])
                clicked = next(clicks, None)
            objects = []
            shown = counts.keys() | prompts.keys()
            if only is not None:
                shown &= only
            if not shown:
                continue
            for object_id in sorted(shown):
                mask = empty
                if object_id in counts:
                    mask = {"size": [height, width], "counts": counts[object_id]}
                item: dict[str, object] = {"object_id": object_id, "mask": mask}
                if object_id in prompts:
                    points, labels = prompts[object_id]
                    item["points"] = (np.asarray(points, np.float64) / scale).tolist()
                    item["labels"] = [int(n) for n in labels]
                objects.append(item)
            yield {"frame_index": int(frame_index), "objects": objects}
    finally:
        connections.close_all()  # this thread's, which nothing else would close


def work_annotations_json(*, export: WorkExport) -> Iterator[bytes]:
    """The annotation file (``{"video", "frames"}``, as ``GET /annotations/<id>.json`` answers
    a session's engine state), in pieces of about :data:`PIECE_BYTES`."""
    piece = [json.dumps({"video": export.video_path})[:-1], ',"frames":[']
    size, first = 0, True
    for frame in work_annotation_frames(export=export):
        text = ("" if first else ",") + json.dumps(frame, separators=(",", ":"))
        first = False
        piece.append(text)
        size += len(text)
        if size >= PIECE_BYTES:
            yield "".join(piece).encode()
            piece, size = [], 0
    piece.append("]}")
    yield "".join(piece).encode()


def work_converted(
    *, export: WorkExport, conversion: Conversion, stop: threading.Event
) -> Iterator[bytes]:
    """The work converted, a piece at a time, in an export process fed from this thread's
    reads of the store. :class:`ServerBusy` at the first piece when too many exports wait;
    :class:`Stopped` once ``stop`` is set (the process killed); closing it kills the process
    too. A fault the conversion finds (an object ID that no label PNG holds) is raised at the
    first piece, before anything is written."""
    pool = export_processes()
    try:
        object_ids = work_object_ids(work_id=export.work_id)
    finally:
        connections.close_all()  # this thread's: the frames are read by the feeding thread
    try:
        yield from pool.stream(
            export_stream,
            stop=stop,
            items=work_annotation_frames(export=export, only=frozenset(object_ids)),
            chunks=conversion.chunks,
            video=export.video,
            object_ids=object_ids,
        )
    except NoTurn as refusal:
        raise exports_busy(pool, refusal) from None
