"""Typed failures of the channel admin, each with the stable code that carries its HTTP status.

Services raise these; the views answer each with its code's status and its :attr:`text`, a
plain-text body made in one place (``views.error_response``), so the texts never drift. The
code of a refused request (a bad body, a method, access) carries its status the same way.
"""

from __future__ import annotations

from core.status_codes import StatusCode


class ErrorCode(StatusCode):
    """A stable code, and the HTTP status the API answers it with."""

    BAD_REQUEST = "BAD_REQUEST", 400
    UNAUTHENTICATED = "UNAUTHENTICATED", 401
    FORBIDDEN = "FORBIDDEN", 403
    CHANNEL_NOT_FOUND = "CHANNEL_NOT_FOUND", 404
    LINK_NOT_FOUND = "LINK_NOT_FOUND", 404
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED", 405
    # A channel whose stream is not http or https: the request was understood, the URL is not
    # one the hub relays.
    UNSUPPORTED_STREAM = "UNSUPPORTED_STREAM", 400
    PLAYLIST_RELOAD_FAILED = "PLAYLIST_RELOAD_FAILED", 500
    GUIDE_REFRESH_FAILED = "GUIDE_REFRESH_FAILED", 500
    # Another process or thread is refreshing the guide: this request waits for nothing.
    GUIDE_REFRESH_BUSY = "GUIDE_REFRESH_BUSY", 409
    SCHEDULE_INVALID = "SCHEDULE_INVALID", 400
    SCHEDULE_ENTRY_NOT_FOUND = "SCHEDULE_ENTRY_NOT_FOUND", 404
    # The schedule holds CHANNELS_SCHEDULE_MAX_ENTRIES: the request is valid, the state refuses.
    SCHEDULE_FULL = "SCHEDULE_FULL", 409
    # No programme of the shown guide on the channel at the time (the guide refreshed since may
    # have moved it).
    PROGRAMME_NOT_FOUND = "PROGRAMME_NOT_FOUND", 404
    # The programme has started or ended, or is in the schedule already: the state refuses.
    PROGRAMME_NOT_SCHEDULABLE = "PROGRAMME_NOT_SCHEDULABLE", 409


class ChannelsAdminError(Exception):
    code: ErrorCode

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def text(self) -> str:
        """What the API answers with: the message, unless the kind of error says otherwise."""
        return self.message


class BadRequest(ChannelsAdminError):
    """The request cannot be read: a body that is not the JSON asked for, a NUL in a filter."""

    code = ErrorCode.BAD_REQUEST


class MethodNotAllowed(ChannelsAdminError):
    """The endpoint takes another method: the one it takes is the message."""

    code = ErrorCode.METHOD_NOT_ALLOWED

    @property
    def text(self) -> str:
        return "method not allowed"


class ChannelNotFound(ChannelsAdminError):
    """No channel of the playlist has the ID (the message); the API does not repeat it."""

    code = ErrorCode.CHANNEL_NOT_FOUND

    @property
    def text(self) -> str:
        return "channel not found"


class PlaylistReloadError(ChannelsAdminError):
    """The playlist could not be downloaded, read or parsed; nothing was changed."""

    code = ErrorCode.PLAYLIST_RELOAD_FAILED

    @property
    def text(self) -> str:
        return f"failed to reload playlist: {self.message}"


class UnsupportedStream(ChannelsAdminError):
    """The channel's stream is not an http or https URL, the only kinds the hub relays."""

    code = ErrorCode.UNSUPPORTED_STREAM


class GuideRefreshError(ChannelsAdminError):
    """The guide could not be fetched or parsed; the last good guide is still shown."""

    code = ErrorCode.GUIDE_REFRESH_FAILED

    @property
    def text(self) -> str:
        return f"failed to refresh the guide: {self.message}"


class GuideRefreshBusy(ChannelsAdminError):
    """A refresh of the guide is under way elsewhere (this process or another)."""

    code = ErrorCode.GUIDE_REFRESH_BUSY

    @property
    def text(self) -> str:
        return "a refresh of the guide is under way"


class LinkNotFound(ChannelsAdminError):
    """No viewer link has the ID (the message)."""

    code = ErrorCode.LINK_NOT_FOUND

    @property
    def text(self) -> str:
        return "link not found"


class ScheduleInvalid(ChannelsAdminError):
    """A schedule entry's values do not make an entry: the message says which and why."""

    code = ErrorCode.SCHEDULE_INVALID


class ScheduleEntryNotFound(ChannelsAdminError):
    """No schedule entry has the ID (the message)."""

    code = ErrorCode.SCHEDULE_ENTRY_NOT_FOUND

    @property
    def text(self) -> str:
        return "schedule entry not found"


class ScheduleFull(ChannelsAdminError):
    """The schedule holds as many entries as it may."""

    code = ErrorCode.SCHEDULE_FULL


class ProgrammeNotFound(ChannelsAdminError):
    """The shown guide has no programme on the channel at the time: the message says why."""

    code = ErrorCode.PROGRAMME_NOT_FOUND


class ProgrammeNotSchedulable(ChannelsAdminError):
    """The programme cannot become an entry: started, ended, or scheduled already."""

    code = ErrorCode.PROGRAMME_NOT_SCHEDULABLE
