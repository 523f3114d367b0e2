"""Failover and switches that fail, on the real server with a real origin of real MPEG-TS: the
playlist's entries that share a tvg-id back each other up, a /ts viewer stays connected through
a failover and goes on decoding, the status says which source plays and what failed, and a
switch to a channel that shows no picture goes back to the channel before, saying why, and a
source whose picture freezes, or whose sound goes silent, gives way to its backup."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from urllib.parse import urlsplit

import av
import pytest

from loopback_fakes.media_upstream import Behaviour, MediaUpstream
from tests.channels_admin.stream_client import select, status, wait_until
from tests.conftest import free_port, running_server

SWITCH_TIMEOUT_SEC = 3
FROZEN_SEC = 3
SILENT_SEC = 3


def closed_port_url() -> str:
    """A loopback URL nothing listens on: the connection is refused."""
    return f"http://127.0.0.1:{free_port()}/dead.ts"


def playlist_for(origin: MediaUpstream) -> str:
    return (
        "#EXTM3U\n"
        '#EXTINF:-1 tvg-id="one",One\n'
        f"{origin.url('/one-a.ts')}\n"
        '#EXTINF:-1 tvg-id="one",One (backup)\n'
        f"{origin.url('/one-b.ts')}\n"
        '#EXTINF:-1 tvg-id="two",Two\n'
        f"{origin.url('/two.ts')}\n"
        '#EXTINF:-1 tvg-id="dead",Dead\n'
        f"{closed_port_url()}\n"
        '#EXTINF:-1 tvg-id="solo",Solo\n'
        f"{origin.url('/solo.ts')}\n"
        '#EXTINF:-1 tvg-id="still",Still\n'
        f"{origin.url('/still-a.ts')}\n"
        '#EXTINF:-1 tvg-id="still",Still (backup)\n'
        f"{origin.url('/still-b.ts')}\n"
        '#EXTINF:-1 tvg-id="quiet",Quiet\n'
        f"{origin.url('/quiet-a.ts')}\n"
        '#EXTINF:-1 tvg-id="quiet",Quiet (backup)\n'
        f"{origin.url('/quiet-b.ts')}\n"
    )


@pytest.fixture(scope="module")
def origin():
    server = MediaUpstream()
    yield server
    server.close()


def server_for(origin: MediaUpstream, var_dir):
    playlist = var_dir / "channels.m3u"
    playlist.write_text(playlist_for(origin), encoding="utf-8")
    return running_server(
        var_dir,
        port=free_port(),  # so that server_pid finds its process
        CHANNELS_PLAYLIST_PATH=str(playlist),
        CHANNELS_DEMO="0",
        CHANNELS_STALL_TIMEOUT="1",
        CHANNELS_SWITCH_TIMEOUT_SEC=str(SWITCH_TIMEOUT_SEC),
        CHANNELS_FROZEN_SEC=str(FROZEN_SEC),
        CHANNELS_PICTURE_CHECK_SEC="1",
        # On for every test here: the sources' beep a second must never count as silence.
        CHANNELS_SILENT_SEC=str(SILENT_SEC),
    )


@pytest.fixture(scope="module")
def server(origin, tmp_path_factory):
    with server_for(origin, tmp_path_factory.mktemp("failover-var")) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def origin_plays(origin):
    origin.behaviour.clear()


class Viewer(threading.Thread):
    """A /ts client that reads in a thread until closed."""

    def __init__(self, server: str) -> None:
        super().__init__(daemon=True)
        parts = urlsplit(server)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
        self.sock.sendall(b"GET /ts HTTP/1.1\r\nHost: test\r\n\r\n")
        self.data = bytearray()
        self.ended = False
        self.start()

    def run(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := self.sock.recv(65536):
                self.data += chunk
        self.ended = True

    def body(self) -> bytes:
        """The TS bytes, without the HTTP head and the chunked framing."""
        head, _, rest = bytes(self.data).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        body = bytearray()
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0 or len(rest) < size:
                break
            body += rest[:size]
            rest = rest[size + 2 :]
        return bytes(body)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.join(timeout=5)
        self.sock.close()


def decoded_frames(data: bytes) -> int:
    with av.open(io.BytesIO(data), format="mpegts") as container:
        return sum(1 for _ in container.decode(video=0))


def test_a_first_switch_to_a_dead_channel_stays_and_keeps_trying(server):
    # (first in the module: no channel was ever picked on its server)
    assert status(server)["channel_name"] == ""
    select(server, "dead")
    wait_until(
        lambda: status(server)["switch_message"] != "Switching to Dead…",
        timeout=SWITCH_TIMEOUT_SEC + 5,
        what="the outcome",
    )
    now = status(server)

    assert now["switch_message"] == "Dead did not answer (connection refused): still trying"
    assert now["switch_returned"] is False
    assert (now["channel_name"], now["live"], now["reconnecting"]) == ("Dead", True, True)
    assert now["last_failure"]["reason"] == "connection refused"


def test_a_failover_keeps_the_viewer_and_the_status_says_what_failed(server, origin):
    select(server, "one")
    wait_until(lambda: status(server)["switch_message"] == "Now playing One", what="playing")
    assert (status(server)["source"], status(server)["sources"]) == ("primary", 2)
    viewer = Viewer(server)
    wait_until(lambda: len(viewer.data) > 50_000, what="viewer data")

    origin.behaviour["/one-a.ts"] = Behaviour.REFUSE
    origin.drop("/one-a.ts")
    wait_until(lambda: status(server)["source"] == "backup 2 of 2", what="the backup plays")
    received = len(viewer.data)
    wait_until(lambda: len(viewer.data) > received + 100_000, what="backup data")
    kept = not viewer.ended
    viewer.close()

    now = status(server)
    assert now["failovers"] == 1
    assert now["last_failure"]["source"] == "primary"
    assert now["last_failure"]["reason"] == "the upstream ended the stream"
    assert now["reconnecting"] is False
    assert now["switch_message"] == "Now playing One"
    assert kept is True  # the server never ended the viewer's stream
    assert decoded_frames(viewer.body()) > 50  # one stream, on through the failover
    assert max(c.overlapping for c in origin.connections) == 0


def test_a_primary_that_never_started_counts_a_failover_once_the_backup_plays(server, origin):
    origin.behaviour["/one-a.ts"] = Behaviour.REFUSE

    select(server, "one")
    wait_until(lambda: status(server)["source"] == "backup 2 of 2", what="the backup plays")

    # as the admin page shows it: "backup 2 of 2 · 1 failover · primary failed …"
    now = status(server)
    assert (now["failovers"], now["last_failure"]["source"]) == (1, "primary")
    assert now["last_failure"]["reason"] == "the upstream answered HTTP 503"


def test_a_switch_to_a_dead_channel_goes_back_to_the_channel_before(server, origin):
    select(server, "two")
    wait_until(lambda: status(server)["switch_message"] == "Now playing Two", what="playing")

    select(server, "dead")
    assert status(server)["switch_message"] == "Switching to Dead…"
    wait_until(
        lambda: status(server)["channel_name"] == "Two",
        timeout=SWITCH_TIMEOUT_SEC + 5,
        what="back on Two",
    )
    wait_until(lambda: not status(server)["transitioning"], what="Two plays again")

    now = status(server)
    assert now["switch_message"] == "Dead did not answer (connection refused): back on Two"
    assert now["switch_returned"] is True
    assert (now["live"], now["upstream_down"], now["source"]) == (True, False, "primary")
    assert max(c.overlapping for c in origin.connections) == 0


def test_an_outage_and_the_return_are_told_as_two_changes_of_stream(server, origin):
    select(server, "solo")
    wait_until(lambda: status(server)["switch_message"] == "Now playing Solo", what="playing")
    before = status(server)

    origin.behaviour["/solo.ts"] = Behaviour.REFUSE
    origin.drop("/solo.ts")
    wait_until(lambda: status(server)["stream_serial"] == before["stream_serial"] + 1, what="slate")
    slate = status(server)
    origin.behaviour.clear()
    wait_until(
        lambda: status(server)["stream_serial"] == before["stream_serial"] + 2,
        timeout=15,
        what="the source back",
    )
    back = status(server)

    assert before["stream_format"] == ""  # the switch's first stream is no change
    assert (slate["stream_format"], slate["reconnecting"]) == ("H.264 Main 640x360, AAC", True)
    assert (back["stream_format"], back["source"]) == ("H.264 Main 320x180, AAC", "primary")


def test_a_primary_whose_picture_freezes_fails_over_and_the_status_says_why(server, origin):
    select(server, "still")
    wait_until(lambda: status(server)["switch_message"] == "Now playing Still", what="playing")

    origin.behave("/still-a.ts", Behaviour.FREEZE)
    wait_until(
        lambda: status(server)["source"] == "backup 2 of 2",
        timeout=FROZEN_SEC + 8,
        what="the backup plays",
    )
    seconds = time.monotonic() - origin.changed["/still-a.ts"]

    now = status(server)
    assert (now["failovers"], now["last_failure"]["source"]) == (1, "primary")
    assert now["last_failure"]["reason"] == "frozen picture for 3 s"
    assert (now["switch_message"], now["reconnecting"]) == ("Now playing Still", False)
    assert FROZEN_SEC <= seconds <= FROZEN_SEC + 3


def test_a_primary_whose_sound_goes_silent_fails_over_and_the_status_says_why(server, origin):
    select(server, "quiet")
    wait_until(lambda: status(server)["switch_message"] == "Now playing Quiet", what="playing")

    origin.behave("/quiet-a.ts", Behaviour.SILENT)
    wait_until(
        lambda: status(server)["source"] == "backup 2 of 2",
        timeout=SILENT_SEC + 8,
        what="the backup plays",
    )
    seconds = time.monotonic() - origin.changed["/quiet-a.ts"]

    now = status(server)
    assert (now["failovers"], now["last_failure"]["source"]) == (1, "primary")
    assert now["last_failure"]["reason"] == "silent audio for 3 s"
    assert (now["switch_message"], now["reconnecting"]) == ("Now playing Quiet", False)
    # the pause after the last beep before the change (0.9 s at most) is silence too
    assert SILENT_SEC - 1 <= seconds <= SILENT_SEC + 3
