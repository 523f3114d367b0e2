"""Typed failures of the segmentation service, each with the stable code clients see.

Services raise these; the GraphQL layer maps them to errors carrying ``extensions.code``, and
the plain HTTP views answer with the status each code carries. An inference worker sends them
to a web process as plain data, which raises the same error there.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """A stable code, and the HTTP status a plain (non-GraphQL) endpoint answers it with."""

    http_status: int

    def __new__(cls, value: str, http_status: int) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.http_status = http_status
        return member

    SESSION_NOT_FOUND = "SESSION_NOT_FOUND", 404
    VIDEO_NOT_FOUND = "VIDEO_NOT_FOUND", 404
    BAD_USER_INPUT = "BAD_USER_INPUT", 400
    UPLOAD_TOO_LARGE = "UPLOAD_TOO_LARGE", 413
    # A stored video that cannot be decoded: the request was understood, the media was not.
    UNSUPPORTED_MEDIA = "UNSUPPORTED_MEDIA", 400
    TOO_MANY_SESSIONS = "TOO_MANY_SESSIONS", 503
    # This client holds its share of the sessions (MAX_SESSIONS_PER_CLIENT): its own doing.
    TOO_MANY_CLIENT_SESSIONS = "TOO_MANY_CLIENT_SESSIONS", 429
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED", 429
    RATE_LIMITED = "RATE_LIMITED", 429
    SERVER_BUSY = "SERVER_BUSY", 503
    STORAGE_FULL = "STORAGE_FULL", 507


class SegmentationError(Exception):
    code: ErrorCode

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def as_message(self) -> dict[str, object]:
        """The error as plain data, as a worker sends it (:func:`error_from_message`)."""
        encoded: dict[str, object] = {"code": self.code.value, "message": self.message}
        retry_after = getattr(self, "retry_after", None)
        if retry_after is not None:
            encoded["retry_after"] = retry_after
        return encoded


class SessionNotFound(SegmentationError):
    code = ErrorCode.SESSION_NOT_FOUND


class TooManySessions(SegmentationError):
    code = ErrorCode.TOO_MANY_SESSIONS


class TooManyClientSessions(SegmentationError):
    """The client holds ``MAX_SESSIONS_PER_CLIENT`` sessions already."""

    code = ErrorCode.TOO_MANY_CLIENT_SESSIONS


class VideoNotFound(SegmentationError):
    code = ErrorCode.VIDEO_NOT_FOUND


class BadUserInput(SegmentationError):
    code = ErrorCode.BAD_USER_INPUT


class UploadTooLarge(SegmentationError):
    code = ErrorCode.UPLOAD_TOO_LARGE


class UnsupportedMedia(SegmentationError):
    code = ErrorCode.UNSUPPORTED_MEDIA


class ResourceExhausted(SegmentationError):
    """The session spent its engine time; it may go on after ``retry_after`` seconds."""

    code = ErrorCode.RESOURCE_EXHAUSTED

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServerBusy(SegmentationError):
    """Too much of the same work is under way; it may be tried again after ``retry_after``."""

    code = ErrorCode.SERVER_BUSY

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StorageFull(SegmentationError):
    """Keeping the upload would take the uploads over their disk quota."""

    code = ErrorCode.STORAGE_FULL


def error_from_message(data: dict[str, object]) -> Exception:
    """The API error a worker answered with; a RuntimeError for a failure of the worker."""
    message = str(data["message"])
    try:
        code = ErrorCode(data["code"])
    except ValueError:
        return RuntimeError(message)
    error = next(kind for kind in SegmentationError.__subclasses__() if kind.code == code)
    if "retry_after" in data:
        return error(message, retry_after=float(data["retry_after"]))
    return error(message)
