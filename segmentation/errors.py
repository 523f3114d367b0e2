"""Typed failures of the segmentation service, each with the stable code clients see.

Services raise these; the GraphQL layer maps them to errors carrying ``extensions.code``, and
the plain HTTP views answer with the status each code carries. An inference worker sends them
to a web process as plain data, which raises the same error there.
"""

from __future__ import annotations

from core.status_codes import StatusCode


class ErrorCode(StatusCode):
    """A stable code, and the HTTP status a plain (non-GraphQL) endpoint answers it with."""

    SESSION_NOT_FOUND = "SESSION_NOT_FOUND", 404
    VIDEO_NOT_FOUND = "VIDEO_NOT_FOUND", 404
    JOB_NOT_FOUND = "JOB_NOT_FOUND", 404
    # No upload being prepared, or failed, of this client's by that ID (POST /uploads)
    UPLOAD_NOT_FOUND = "UPLOAD_NOT_FOUND", 404
    BAD_USER_INPUT = "BAD_USER_INPUT", 400
    UPLOAD_TOO_LARGE = "UPLOAD_TOO_LARGE", 413
    # A stored video that cannot be decoded: the request was understood, the media was not.
    UNSUPPORTED_MEDIA = "UNSUPPORTED_MEDIA", 400
    TOO_MANY_SESSIONS = "TOO_MANY_SESSIONS", 503
    # This client holds its share of the sessions (MAX_SESSIONS_PER_CLIENT): its own doing.
    TOO_MANY_CLIENT_SESSIONS = "TOO_MANY_CLIENT_SESSIONS", 429
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED", 429
    RATE_LIMITED = "RATE_LIMITED", 429
    # More work in one request than one GraphQL request may ask for (segmentation/graphql/cost.py)
    QUERY_TOO_COMPLEX = "QUERY_TOO_COMPLEX", 400
    SERVER_BUSY = "SERVER_BUSY", 503
    STORAGE_FULL = "STORAGE_FULL", 507


class SegmentationError(Exception):
    code: ErrorCode
    # What else a plain endpoint's answer carries beside the message and the code (plain data)
    details: dict[str, object]

    def __init__(self, message: str, *, details: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def as_message(self) -> dict[str, object]:
        """The error as plain data, as a worker sends it (:func:`error_from_message`)."""
        encoded: dict[str, object] = {"code": self.code.value, "message": self.message}
        retry_after = getattr(self, "retry_after", None)
        if retry_after is not None:
            encoded["retry_after"] = retry_after
        if self.details:
            encoded["details"] = self.details
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


class UploadNotFound(SegmentationError):
    code = ErrorCode.UPLOAD_NOT_FOUND


class JobNotFound(SegmentationError):
    code = ErrorCode.JOB_NOT_FOUND


class BadUserInput(SegmentationError):
    code = ErrorCode.BAD_USER_INPUT


class UploadTooLarge(SegmentationError):
    code = ErrorCode.UPLOAD_TOO_LARGE


class UnsupportedMedia(SegmentationError):
    code = ErrorCode.UNSUPPORTED_MEDIA


class RetryLater(SegmentationError):
    """A refusal the client may retry after ``retry_after`` seconds; an operation it cut short
    says in ``details`` what was done (an import: which frames)."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float = 1.0,
        details: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message, details=details)
        self.retry_after = retry_after


class ResourceExhausted(RetryLater):
    """The session spent its engine time."""

    code = ErrorCode.RESOURCE_EXHAUSTED


class RateLimited(RetryLater):
    """The client spent its cost limit (``RATE_LIMIT_COST``) in the middle of an operation that
    is charged step by step."""

    code = ErrorCode.RATE_LIMITED


class TooComplex(SegmentationError):
    """More engine work in one request than one GraphQL request may ask for."""

    code = ErrorCode.QUERY_TOO_COMPLEX


class ServerBusy(RetryLater):
    """Too much of the same work is under way."""

    code = ErrorCode.SERVER_BUSY


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
    error = ERROR_KINDS[code]
    extra: dict[str, object] = {}
    if "retry_after" in data:
        extra["retry_after"] = float(data["retry_after"])
    if isinstance(data.get("details"), dict):
        extra["details"] = data["details"]
    return error(message, **extra)


def _descendants(kind: type[SegmentationError]) -> list[type[SegmentationError]]:
    return [d for sub in kind.__subclasses__() for d in (sub, *_descendants(sub))]


# each code's error class (RetryLater's kinds are a level further down)
ERROR_KINDS = {kind.code: kind for kind in _descendants(SegmentationError) if "code" in vars(kind)}
