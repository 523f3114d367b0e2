"""The operations on sessions, by name, with answers that travel as they are: plain data
(masks as COCO RLE), as a worker sends them over the channel layer. The embedded server calls
the same table in-process, so both give the same answers."""

from __future__ import annotations

from collections.abc import Callable

from segmentation.errors import ErrorCode, ResourceExhausted, SegmentationError
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

# Every error type by its code (the worker and the web process import the same classes).
_ERRORS = {error.code: error for error in SegmentationError.__subclasses__()}


def error_encode(error: SegmentationError) -> dict[str, object]:
    encoded: dict[str, object] = {"code": error.code.value, "message": error.message}
    if isinstance(error, ResourceExhausted):
        encoded["retry_after"] = error.retry_after
    return encoded


def error_decode(data: dict[str, object]) -> Exception:
    """The API error a worker answered with; a RuntimeError for a failure of the worker."""
    message = str(data["message"])
    try:
        code = ErrorCode(data["code"])
    except ValueError:
        return RuntimeError(message)
    if code == ErrorCode.RESOURCE_EXHAUSTED:
        return ResourceExhausted(message, retry_after=float(data.get("retry_after", 1)))
    return _ERRORS[code](message)
