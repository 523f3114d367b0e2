"""Typed failures of the segmentation service, each with the stable code clients see.

Services raise these; the GraphQL layer maps them to errors carrying ``extensions.code``.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    VIDEO_NOT_FOUND = "VIDEO_NOT_FOUND"
    BAD_USER_INPUT = "BAD_USER_INPUT"
    UPLOAD_TOO_LARGE = "UPLOAD_TOO_LARGE"
    UNSUPPORTED_MEDIA = "UNSUPPORTED_MEDIA"
    TOO_MANY_SESSIONS = "TOO_MANY_SESSIONS"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    RATE_LIMITED = "RATE_LIMITED"
    SERVER_BUSY = "SERVER_BUSY"
    STORAGE_FULL = "STORAGE_FULL"


class SegmentationError(Exception):
    code: ErrorCode

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SessionNotFound(SegmentationError):
    code = ErrorCode.SESSION_NOT_FOUND


class TooManySessions(SegmentationError):
    code = ErrorCode.TOO_MANY_SESSIONS


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
