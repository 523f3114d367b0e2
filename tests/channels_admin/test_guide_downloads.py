"""Guide downloads from a hostile or broken server on loopback: one that drips a byte a second
for ever is cut off at the download's deadline, one that goes silent at the read timeout
(each said as it is), one that sends more than the cap without saying its length is cut at
the cap; either way the refresh fails with the reason kept for the admin and the last good
guide stays."""

from __future__ import annotations

import http.server
import time

import pytest

from channels_admin.errors import GuideRefreshError
from channels_admin.models import Programme
from channels_admin.selectors import guide_state
from channels_admin.services import downloads
from channels_admin.services.guide import guide_refresh
from loopback_fakes.server import LoopbackServer
from tests.channels_admin.test_guide_refresh import guided, origin  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

# The hostile servers stop by themselves after this long, whatever the client does.
SERVER_LIFE_SEC = 20


def dripping(handler: http.server.BaseHTTPRequestHandler) -> None:
    """A guide whose bytes come one a second, with no end (until SERVER_LIFE_SEC)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/xml")
    handler.end_headers()
    handler.wfile.flush()
    for _ in range(SERVER_LIFE_SEC):
        try:
            handler.wfile.write(b" ")
            handler.wfile.flush()
        except OSError:
            return  # the client hung up
        time.sleep(1)


def stalling(handler: http.server.BaseHTTPRequestHandler) -> None:
    """A guide whose headers come, then nothing (until SERVER_LIFE_SEC)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/xml")
    handler.end_headers()
    handler.wfile.flush()
    time.sleep(SERVER_LIFE_SEC)


def flooding(handler: http.server.BaseHTTPRequestHandler) -> None:
    """A guide with no Content-Length that goes on past any cap (until SERVER_LIFE_SEC, or
    100 MB)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/xml")
    handler.end_headers()
    chunk = b"<tv>" + b" " * (64 * 1024 - 4)
    deadline = time.monotonic() + SERVER_LIFE_SEC
    for _ in range(1600):
        if time.monotonic() > deadline:
            return
        try:
            handler.wfile.write(chunk)
        except OSError:
            return


@pytest.fixture
def hostile():
    servers: list[LoopbackServer] = []

    def start(answer) -> str:
        servers.append(LoopbackServer(answer))
        return servers[-1].url("/guide.xml")

    yield start
    for server in servers:
        server.close()


def refresh_fails_keeping_the_guide(url: str) -> tuple[str, float]:
    """Refresh from ``url`` (first, before the playlist's good guide): the refresh's error and
    how long it took, once checked that the last good guide stayed and the reason is kept."""
    before = list(Programme.objects.order_by("id").values_list("channel", "title", "version"))
    began = time.monotonic()
    with pytest.raises(GuideRefreshError) as raised:
        guide_refresh()
    took = time.monotonic() - began
    after = list(Programme.objects.order_by("id").values_list("channel", "title", "version"))
    assert after == before
    state = guide_state()
    assert (state["version"], state["programmes"], state["last_error"]) == (
        1,
        5,
        raised.value.message,
    )
    return raised.value.message, took


def test_a_server_that_drips_for_ever_is_cut_off_at_the_deadline(guided, hostile, settings):  # noqa: F811
    guide_refresh()  # the last good guide: version 1, 5 programmes
    settings.CHANNELS_GUIDE_TIMEOUT_SEC = 3
    url = hostile(dripping)
    settings.CHANNELS_GUIDE_URLS = [url]

    message, took = refresh_fails_keeping_the_guide(url)

    # each byte comes well within any read timeout: only the deadline over the whole cuts it
    assert message == f"download of {url} took longer than 3 s"
    assert 3 <= took < 6


def test_a_server_that_sends_past_the_cap_without_a_length_is_cut_at_the_cap(
    guided,  # noqa: F811
    hostile,
    settings,
):
    guide_refresh()
    settings.CHANNELS_GUIDE_MAX_BYTES = 1024 * 1024
    url = hostile(flooding)
    settings.CHANNELS_GUIDE_URLS = [url]

    message, took = refresh_fails_keeping_the_guide(url)

    assert message == f"download of {url}: larger than 1048576 bytes"
    assert took < 5


def test_a_server_that_stalls_is_cut_off_at_the_read_timeout_and_says_so(
    guided,  # noqa: F811
    hostile,
    settings,
    monkeypatch,
):
    guide_refresh()
    monkeypatch.setattr(downloads, "READ_TIMEOUT_SEC", 1)
    settings.CHANNELS_GUIDE_TIMEOUT_SEC = 10
    url = hostile(stalling)
    settings.CHANNELS_GUIDE_URLS = [url]

    message, took = refresh_fails_keeping_the_guide(url)

    # not "took longer than 10 s": it was the silence, of 1 s
    assert message == f"download of {url}: the server sent nothing for 1 s"
    assert 1 <= took < 4
