"""The hub and /ts end to end: the real ASGI server (daphne) and a real upstream HTTP server."""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import itertools
import os
import re
import signal
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests

from loopback_fakes.ts_upstream import PACKET, TsUpstream, packet_sequence
from tests.channels_admin.stream_client import select, status, wait_until
from tests.conftest import free_port, running_server, server_pid

VIEWER_BUFFER_KB = 256


def playlist_for(upstream: TsUpstream) -> str:
    return (
        "#EXTM3U\n"
        '#EXTINF:-1 tvg-id="a",Channel A\n'
        f"{upstream.url('/a.ts')}\n"
        '#EXTINF:-1 tvg-id="b",Channel B\n'
        f"{upstream.url('/b.ts')}\n"
        '#EXTINF:-1 tvg-id="c",Channel C\n'
        "#EXTVLCOPT:http-user-agent=TestPlayer/1.0\n"
        "#EXTVLCOPT:http-referrer=http://portal.example/\n"
        f"{upstream.url('/c.ts')}\n"
    )


@pytest.fixture(scope="module")
def upstream():
    server = TsUpstream(bitrate_bps=4_000_000)
    yield server
    server.close()


@pytest.fixture(scope="module")
def server(upstream, tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("stream-var")
    playlist = var_dir / "channels.m3u"
    playlist.write_text(playlist_for(upstream), encoding="utf-8")
    with running_server(
        var_dir,
        CHANNELS_PLAYLIST_PATH=str(playlist),
        CHANNELS_STALL_TIMEOUT="1",
        CHANNELS_VIEWER_BUFFER_KB=str(VIEWER_BUFFER_KB),
    ) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def upstream_behaves(upstream):
    upstream.refuse = upstream.stall = upstream.garbage = upstream.close_at_once = False


class Viewer(threading.Thread):
    """A /ts client reading in a thread until it has ``want`` bytes or the stream ends."""

    def __init__(self, server: str, want: int) -> None:
        super().__init__(daemon=True)
        parts = urlsplit(server)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        self.connection.request("GET", "/ts")
        self.response = self.connection.getresponse()
        self.want = want
        self.data = bytearray()
        self.ended = False
        self.dropped = False  # the connection broke off, rather than the response ending
        self.start()

    def run(self) -> None:
        try:
            while len(self.data) < self.want:
                chunk = self.response.read1(65536)
                if not chunk:
                    self.ended = True
                    return
                self.data += chunk
        except (OSError, http.client.HTTPException):
            self.ended = self.dropped = True

    def close(self) -> None:
        """Hang up; the reading thread sees the end of the stream."""
        with contextlib.suppress(OSError):
            self.connection.sock.shutdown(socket.SHUT_RDWR)
        self.join(timeout=5)
        self.connection.close()


def sequences(data: bytes) -> list[int]:
    """Sequence numbers of the packets; the reader may have stopped inside the last one."""
    data = data[: len(data) - len(data) % PACKET]
    packets = [data[i : i + PACKET] for i in range(0, len(data), PACKET)]
    assert all(p[0] == 0x47 for p in packets)
    return [packet_sequence(p) for p in packets]


def test_ts_is_503_until_a_channel_is_selected(server):
    response = requests.get(f"{server}/ts", timeout=5)

    assert response.status_code == 503
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert response.text == "no channel selected: an administrator must pick one first"


def test_viewers_get_identical_bytes_over_one_upstream_connection(server, upstream):
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes")
    before = len(upstream.connections)

    viewers = [Viewer(server, want=1_000_000) for _ in range(5)]
    for viewer in viewers:
        viewer.join(timeout=15)

    assert [len(v.data) >= v.want for v in viewers] == [True] * 5
    headers = viewers[0].response.headers
    assert headers["Content-Type"] == "video/mp2t"
    assert headers["Cache-Control"] == "no-cache"
    assert headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in headers
    assert len(upstream.connections) == before  # no new connection for the viewers
    assert len(upstream.open_connections) == 1
    runs = [sequences(bytes(v.data)) for v in viewers]
    for run in runs:
        assert run == list(range(run[0], run[0] + len(run)))  # contiguous, nothing lost
    first = max(run[0] for run in runs)
    last = min(run[-1] for run in runs)
    assert last - first > 2000
    slices = {
        bytes(v.data[(first - run[0]) * PACKET : (last - run[0] + 1) * PACKET])
        for v, run in zip(viewers, runs, strict=True)
    }
    assert len(slices) == 1
    for viewer in viewers:
        viewer.close()


def test_an_upstream_sending_garbage_is_reported_down(server, upstream):
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes")

    upstream.garbage = True
    wait_until(lambda: status(server)["upstream_down"], timeout=10, what="upstream_down")
    detail = status(server)["upstream_detail"]
    upstream.garbage = False

    assert detail == "the upstream is not sending MPEG-TS"
    wait_until(lambda: not status(server)["upstream_down"], timeout=15, what="recovery")


def test_a_viewer_that_leaves_is_freed_at_once(server, upstream):
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes")
    viewers = [Viewer(server, want=10**9) for _ in range(3)]
    wait_until(lambda: all(v.data for v in viewers), what="viewer data")
    assert status(server)["viewers"] == 3

    viewers[0].close()

    wait_until(lambda: status(server)["viewers"] == 2, timeout=1, what="one viewer freed")
    for viewer in viewers[1:]:
        viewer.close()
    wait_until(lambda: status(server)["viewers"] == 0, timeout=1, what="all viewers freed")
    assert len(upstream.open_connections) == 1  # the channel stays connected


def test_switch_closes_the_old_upstream_before_opening_the_new(server, upstream):
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes of A")
    viewer = Viewer(server, want=10**9)
    wait_until(lambda: len(viewer.data) > 0, what="viewer data")

    select(server, "b")

    viewer.join(timeout=5)
    assert viewer.ended is True  # the player rebuilds for the new stream
    wait_until(lambda: not status(server)["transitioning"], what="first bytes of B")
    newest = upstream.connections[-1]
    assert newest.path == "/b.ts"
    assert newest.overlapping == 0
    assert [c.path for c in upstream.open_connections] == ["/b.ts"]
    assert max(c.overlapping for c in upstream.connections) == 0
    assert status(server)["channel_name"] == "Channel B"


def test_upstream_requests_carry_the_playlist_headers(server, upstream):
    select(server, "c")
    wait_until(lambda: upstream.connections[-1].path == "/c.ts", what="connection to C")

    headers = upstream.connections[-1].headers

    assert headers["User-Agent"] == "TestPlayer/1.0"
    assert headers["Referer"] == "http://portal.example/"


def test_upstream_drop_marks_it_down_then_recovers_with_viewers_kept(server, upstream):
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes")
    viewer = Viewer(server, want=10**9)
    wait_until(lambda: len(viewer.data) > 0, what="viewer data")

    upstream.refuse = True
    upstream.drop()
    wait_until(lambda: status(server)["upstream_down"], what="upstream_down")
    assert status(server)["upstream_detail"] in {
        "the upstream ended the stream",
        "the upstream answered HTTP 503",
    }
    stalled_at = len(viewer.data)
    upstream.refuse = False
    wait_until(lambda: not status(server)["upstream_down"], timeout=15, what="recovery")
    wait_until(lambda: len(viewer.data) > stalled_at + 100 * PACKET, what="bytes after recovery")

    assert viewer.ended is False
    assert len(upstream.open_connections) == 1
    assert max(c.overlapping for c in upstream.connections) == 0
    viewer.close()


def test_an_upstream_that_closes_at_once_is_down_and_retried_one_connection_at_a_time(
    server, upstream
):
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes")
    viewer = Viewer(server, want=10**9)
    wait_until(lambda: len(viewer.data) > 0, what="viewer data")
    upstream.close_at_once = True
    upstream.drop()
    wait_until(lambda: status(server)["upstream_down"], what="upstream_down")
    tries = len(upstream.connections)
    wait_until(lambda: len(upstream.connections) >= tries + 2, timeout=15, what="two retries")

    assert status(server)["upstream_detail"] == "the upstream ended the stream"
    upstream.close_at_once = False
    wait_until(lambda: not status(server)["upstream_down"], timeout=15, what="recovery")
    stalled_at = len(viewer.data)
    wait_until(lambda: len(viewer.data) > stalled_at + 100 * PACKET, what="bytes after recovery")
    assert viewer.ended is False
    assert max(c.overlapping for c in upstream.connections) == 0
    assert len(upstream.open_connections) == 1
    viewer.close()


def test_viewers_coming_and_going_fast_leave_the_others_and_the_upstream_alone(server, upstream):
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes")
    steady = Viewer(server, want=10**9)
    wait_until(lambda: len(steady.data) > 0, what="viewer data")
    connections = len(upstream.connections)

    # 10 rounds of 20 viewers that connect at once, read a little and hang up
    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        for _ in range(10):
            churn = list(pool.map(lambda _: Viewer(server, want=PACKET * 10), range(20)))
            for viewer in churn:
                viewer.join(timeout=10)
                viewer.close()
    wait_until(lambda: status(server)["viewers"] == 1, timeout=5, what="churn freed")
    received = len(steady.data)
    wait_until(lambda: len(steady.data) > received + 100 * PACKET, what="steady viewer fed")

    run = sequences(bytes(steady.data))
    assert run == list(range(run[0], run[0] + len(run)))  # nothing lost by the steady viewer
    assert len(upstream.connections) == connections
    assert len(upstream.open_connections) == 1
    steady.close()


def test_stalled_upstream_is_down_after_the_read_timeout(server, upstream):
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes")

    upstream.stall = True
    wait_until(lambda: status(server)["upstream_down"], timeout=5, what="upstream_down")
    assert status(server)["upstream_detail"] == "the upstream stalled (no data for 1 s)"
    upstream.stall = False

    wait_until(lambda: not status(server)["upstream_down"], timeout=15, what="recovery")
    assert max(c.overlapping for c in upstream.connections) == 0


class SlowConnection(http.client.HTTPConnection):
    """An HTTP connection with a tiny receive buffer, for a viewer that stops reading."""

    def connect(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect((self.host, self.port))


def test_a_viewer_that_reads_nothing_does_not_slow_the_others(server, upstream):
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes")
    parts = urlsplit(server)
    slow = SlowConnection(parts.hostname, parts.port, timeout=10)
    slow.request("GET", "/ts")
    slow_response = slow.getresponse()
    seconds = 4
    fast = Viewer(server, want=upstream.bitrate_bps // 8 * seconds)

    started = time.monotonic()
    fast.join(timeout=seconds * 3)
    elapsed = time.monotonic() - started
    slow_data = bytearray()
    while len(slow_data) < 2_000_000:
        slow_data += slow_response.read1(65536)
    live_edge = sequences(bytes(fast.data))[-1]
    slow.close()
    fast.close()

    # The fast viewer kept the upstream's pace while the slow one read nothing.
    assert len(fast.data) >= fast.want
    assert elapsed < seconds * 1.25
    # The slow viewer lost its oldest data, in whole packets, and was kept near the live edge.
    run = sequences(bytes(slow_data))
    gaps = [b - a for a, b in itertools.pairwise(run) if b != a + 1]
    assert len(gaps) >= 1
    assert all(gap > 1 for gap in gaps)
    packets_per_second = upstream.bitrate_bps / 8 / PACKET
    assert run[-1] > live_edge - 2 * packets_per_second


@pytest.fixture(scope="module")
def _capped_server(upstream, tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("capped-var")
    playlist = var_dir / "channels.m3u"
    playlist.write_text(playlist_for(upstream), encoding="utf-8")
    with running_server(
        var_dir, port=free_port(), CHANNELS_PLAYLIST_PATH=str(playlist), CHANNELS_MAX_VIEWERS="2"
    ) as base_url:
        yield base_url


@pytest.fixture
def capped_server(_capped_server):
    """A server of the module's own that carries two viewers at most, relaying channel "a",
    with none left of the test before: the tests below stop its process, or fill it, and read
    its counts (those before the test subtracted)."""
    server = _capped_server
    select(server, "a")
    wait_until(lambda: not status(server)["transitioning"], what="first bytes")
    wait_until(lambda: status(server)["viewers"] == 0, what="the viewers before gone")
    return server


def test_past_the_cap_a_viewer_is_refused_at_once_and_the_others_keep_their_rate(
    capped_server, upstream
):
    before = status(capped_server)
    wait_until(lambda: not status(capped_server)["transitioning"], what="first bytes")
    admitted = [Viewer(capped_server, want=2_000_000) for _ in range(2)]
    wait_until(lambda: status(capped_server)["viewers"] == 2, what="two viewers")

    # the third is refused at once, and says when to come back
    started = time.monotonic()
    refused = requests.get(f"{capped_server}/ts", timeout=5)
    answered = time.monotonic() - started
    during = status(capped_server)

    # the admitted two get the upstream's full rate: 2 MB of a 4 Mbit/s stream in about 4 s
    for viewer in admitted:
        viewer.join(timeout=15)
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "10"
    assert refused.text == "this server carries its most viewers (2): try again shortly"
    assert answered < 1.0, answered
    assert [len(viewer.data) >= viewer.want for viewer in admitted] == [True, True]
    assert (during["viewers"], during["refusing_viewers"], during["viewers_refused"]) == (
        2,
        True,
        before["viewers_refused"] + 1,
    )

    # once one leaves, there is room again
    admitted[0].close()
    wait_until(lambda: status(capped_server)["viewers"] == 1, what="one viewer left")
    again = Viewer(capped_server, want=100_000)
    again.join(timeout=10)
    after = status(capped_server)
    admitted[1].close()
    again.close()
    assert again.response.status == 200
    assert len(again.data) >= 100_000
    assert (after["refusing_viewers"], after["viewers_refused"]) == (
        True,
        before["viewers_refused"] + 1,
    )


def test_a_server_that_stood_still_refuses_new_viewers_until_it_has_caught_up(capped_server):
    server = capped_server
    before = status(server)
    watching = Viewer(server, want=10**9)
    wait_until(lambda: len(watching.data) > 0, what="the first viewer's bytes")

    # the process stands still (as a loop busy for 0.9 s would) while a viewer asks
    pid = server_pid(server)
    os.kill(pid, signal.SIGSTOP)
    try:
        arriving = http.client.HTTPConnection("127.0.0.1", urlsplit(server).port, timeout=10)
        arriving.request("GET", "/ts")
        time.sleep(0.9)
    finally:
        os.kill(pid, signal.SIGCONT)
    refused = arriving.getresponse()
    refusal = (refused.status, refused.getheader("Retry-After"), refused.read().decode())
    arriving.close()

    time.sleep(0.5)  # caught up
    watched_before = len(watching.data)
    again = Viewer(server, want=200_000)
    again.join(timeout=10)
    after = status(server)
    watched_on = not watching.ended
    watching.close()

    assert refusal[:2] == (503, "10")
    assert re.fullmatch(
        r"this server carries all the viewers it can "
        r"\(its event loop (runs|ran) \d\.\d\d s late\): try again shortly",
        refusal[2],
    ), refusal[2]
    assert again.response.status == 200
    assert len(again.data) >= 200_000
    # the viewer it had goes on: a stall is no reason to cut anyone off
    assert len(watching.data) > watched_before
    assert watched_on is True
    # (two viewers, within the cap: the refusal was the stall's)
    assert (after["viewers"], after["viewers_refused"], after["viewers_shed"]) == (
        2,
        before["viewers_refused"] + 1,
        before["viewers_shed"],
    )


def test_a_server_that_cannot_keep_up_cuts_its_newest_viewer_off_and_keeps_the_other(
    capped_server,
):
    server = capped_server
    before = status(server)
    older = Viewer(server, want=10**9)
    newer = Viewer(server, want=10**9)
    wait_until(lambda: len(older.data) and len(newer.data), what="both viewers' bytes")
    time.sleep(1.5)  # no one else arrives: the two are the load

    # the process gets a fifteenth of the time it needs, for 3 s: its loop stays late. Each
    # run is shorter than the guard's tick, so no two of its looks fall in one run and every
    # look finds the loop at least 0.6 s late
    pid = server_pid(server)
    started = time.monotonic()
    while time.monotonic() - started < 3:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.7)
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.05)
    newer.join(timeout=5)
    time.sleep(0.5)
    older_before = len(older.data)
    wait_until(lambda: len(older.data) > older_before + 100_000, what="the older goes on")
    after = status(server)
    older_on = not older.ended
    older.close()

    # dropped with what was buffered for it: the time it would take is what the server lacks
    assert (newer.ended, newer.dropped) == (True, True)
    assert older_on is True
    assert (after["viewers"], after["viewers_shed"], after["refusing_viewers"]) == (
        1,
        before["viewers_shed"] + 1,
        True,
    )
