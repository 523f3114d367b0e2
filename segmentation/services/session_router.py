"""Where a session's operations run: in this process (the embedded default), or in the
inference worker that holds the session (``SEGMENTATION_WORKERS``). Both go through the same
table of operations (segmentation/workers/operations.py) and give the same answers: masks as
COCO RLE, ``{"frame_index", "objects": [[object_id, rle], ...], "engine_seconds"}``."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings

from core.threads import iterate_in_thread
from segmentation.selectors import video_get
from segmentation.services.sessions import PropagatedFrame, session_propagate
from segmentation.services.videos import media_path
from segmentation.workers.client import worker_client
from segmentation.workers.operations import OPERATIONS


def _call(op: str, **args: Any) -> Any:
    if settings.SEGMENTATION_WORKERS:
        return worker_client().call(args.pop("session_id"), op, **args)
    return OPERATIONS[op](**args)


def session_start(*, path: str) -> str:
    """A new session on the library's video at ``path``; its ID."""
    video = video_get(path=path)
    args = {"video_path": video.path, "file": str(media_path(video.path))}
    if settings.SEGMENTATION_WORKERS:
        return worker_client().open(**args)
    return OPERATIONS["open"](**args)


def session_close(*, session_id: str) -> bool:
    return _call("close", session_id=session_id)


def session_engine(*, session_id: str) -> str:
    """What answers the session, in a few words (the engine of the worker that holds it)."""
    return _call("engine", session_id=session_id)


def session_ping(*, session_id: str) -> bool:
    return _call("ping", session_id=session_id)


def session_add_points(
    *,
    session_id: str,
    frame_index: int,
    object_id: int,
    points: list[list[float]],
    labels: list[int],
    clear_old_points: bool,
) -> dict:
    return _call(
        "add_points",
        session_id=session_id,
        frame_index=frame_index,
        object_id=object_id,
        points=points,
        labels=labels,
        clear_old_points=clear_old_points,
    )


def session_clear_points_in_frame(*, session_id: str, frame_index: int, object_id: int) -> dict:
    return _call(
        "clear_points_in_frame",
        session_id=session_id,
        frame_index=frame_index,
        object_id=object_id,
    )


def session_clear_points_in_video(*, session_id: str) -> None:
    _call("clear_points_in_video", session_id=session_id)


def session_remove_object(*, session_id: str, object_id: int) -> list[dict]:
    return _call("remove_object", session_id=session_id, object_id=object_id)


def session_cancel_propagation(*, session_id: str) -> bool:
    return _call("cancel_propagation", session_id=session_id)


def session_annotations(*, session_id: str) -> dict:
    return _call("annotations", session_id=session_id)


async def session_propagation(
    *, session_id: str, start_frame_index: int
) -> AsyncIterator[PropagatedFrame]:
    """The session's propagation as it is computed. Raises the API's error (no such session, a
    start outside the video) before the first frame; closing it early stops the engine within
    a frame."""
    if settings.SEGMENTATION_WORKERS:
        return await worker_client().propagate(session_id, start_frame_index)
    frames = session_propagate(session_id=session_id, start_frame_index=start_frame_index)
    # One frame in hand at most: a cancel or a disconnect stops the stream within a frame.
    stop = threading.Event()
    return iterate_in_thread(lambda: frames, stop=stop, name="propagation", buffered=1)
