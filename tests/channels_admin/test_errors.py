"""Each failure of the channel admin carries its code, the code its HTTP status, and the text
the API answers with (the views make the response from these alone)."""

from __future__ import annotations

import pytest

from channels_admin.access import Denied
from channels_admin.errors import (
    BadRequest,
    ChannelNotFound,
    ErrorCode,
    MethodNotAllowed,
    PlaylistReloadError,
    UnsupportedStream,
)


@pytest.mark.parametrize(
    ("error", "code", "status", "text"),
    [
        (BadRequest("invalid json"), "BAD_REQUEST", 400, "invalid json"),
        (MethodNotAllowed("GET"), "METHOD_NOT_ALLOWED", 405, "method not allowed"),
        (ChannelNotFound("news.one"), "CHANNEL_NOT_FOUND", 404, "channel not found"),
        (UnsupportedStream("file://"), "UNSUPPORTED_STREAM", 400, "file://"),
        (
            PlaylistReloadError("the playlist is HTML"),
            "PLAYLIST_RELOAD_FAILED",
            500,
            "failed to reload playlist: the playlist is HTML",
        ),
    ],
)
def test_an_error_carries_its_code_status_and_text(error, code, status, text):
    assert (error.code, error.code.http_status, error.text) == (code, status, text)


def test_a_refused_access_carries_its_code_too():
    assert [(d.code, d.code.http_status) for d in Denied] == [
        (ErrorCode.UNAUTHENTICATED, 401),
        (ErrorCode.UNAUTHENTICATED, 401),
        (ErrorCode.FORBIDDEN, 403),
        (ErrorCode.FORBIDDEN, 403),
        (ErrorCode.FORBIDDEN, 403),
    ]
