"""The operations on sessions, by name, with answers that travel as they are: plain data
(masks as COCO RLE), as a worker sends them over the channel layer. The embedded server calls
the same table in-process, so both give the same answers."""

from __future__ import annotations

from collections.abc import Callable

from segmentation.errors import (
    BadUserInput,
    ErrorCode,
    SegmentationError,
    SessionNotFound,
    TooManySessions,
    UnsupportedMedia,
    UploadTooLarge,
    VideoNotFound,
)
from segmentation.rle import rle_encode
from segmentation.services import sessions


def frame_encode(result: sessions.FrameMasks) -> dict:
    """``{"frame_index", "objects": [[object_id, rle], ...] by object ID, "engine_seconds"}``."""
    return {
        "frame_index": result.frame_index,
        "objects": [[key, rle_encode(mask)] for key, mask in sorted(result.masks.items())],
        "engine_seconds": result.engine_seconds,
    }


def _open(*, video_path: str, file: str) -> str:
    return sessions.session_open(video_path=video_path, file=file).id


def _add_points(**arguments: object) -> dict:
    return frame_encode(sessions.session_add_points(**arguments))


def _clear_points_in_frame(**arguments: object) -> dict:
    return frame_encode(sessions.session_clear_points_in_frame(**arguments))


def _remove_object(**arguments: object) -> list[dict]:
    return [frame_encode(frame) for frame in sessions.session_remove_object(**arguments)]


OPERATIONS: dict[str, Callable[..., object]] = {
    "open": _open,
    "close": sessions.session_close,
    "ping": sessions.session_ping,
    "add_points": _add_points,
    "clear_points_in_frame": _clear_points_in_frame,
    "clear_points_in_video": sessions.session_clear_points_in_video,
    "remove_object": _remove_object,
    "cancel_propagation": sessions.session_cancel_propagation,
    "annotations": sessions.session_annotations,
    "engine": sessions.session_engine,
}

_ERRORS = {
    error.code: error
    for error in (
        BadUserInput,
        SessionNotFound,
        TooManySessions,
        UnsupportedMedia,
        UploadTooLarge,
        VideoNotFound,
    )
}


def error_encode(error: SegmentationError) -> dict[str, str]:
    return {"code": error.code.value, "message": error.message}


def error_decode(data: dict[str, str]) -> Exception:
    """The API error a worker answered with; a RuntimeError for a failure of the worker."""
    try:
        code = ErrorCode(data["code"])
    except ValueError:
        return RuntimeError(data["message"])
    return _ERRORS[code](data["message"])
