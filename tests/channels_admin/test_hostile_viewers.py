"""Hostile clients of /ts and the demo channels (issue 47, items 1 and 2), mounted against the
real server (daphne) on loopback: connections reset (``SO_LINGER`` 0) right after their
``GET``, and readers that never read. The honest viewers must be admitted and fed throughout,
the server must count exactly the connections it has, and log no traceback."""

from __future__ import annotations

import contextlib
import http.client
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from select import select as readable_of
from urllib.parse import urlsplit

import pytest
import requests

from loopback_fakes.ts_upstream import TsUpstream
from tests.channels_admin.stream_client import select, status, wait_until
from tests.channels_admin.test_stream_server import Viewer, playlist_for
from tests.conftest import free_port, running_server

STALLED_VIEWER_SEC = 3


@pytest.fixture(scope="module")
def upstream() -> Iterator[TsUpstream]:
    server = TsUpstream(bitrate_bps=4_000_000)
    yield server
    server.close()


@pytest.fixture(scope="module")
def relaying(upstream, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """A server relaying channel "a", and its log."""
    var_dir = tmp_path_factory.mktemp("hostile-ts")
    playlist = var_dir / "channels.m3u"
    playlist.write_text(playlist_for(upstream), encoding="utf-8")
    with running_server(
        var_dir,
        CHANNELS_PLAYLIST_PATH=str(playlist),
        CHANNELS_STALLED_VIEWER_SEC=str(STALLED_VIEWER_SEC),
    ) as server:
        select(server, "a")
        wait_until(lambda: not status(server)["transitioning"], what="first bytes")
        yield server, var_dir / "daphne.log"


@pytest.fixture
def demo_server(tmp_path) -> Iterator[tuple[str, Path]]:
    """A server of its own with the default playlist: its demo channels, and its log."""
    port = free_port()
    with running_server(tmp_path, port=port, SERVER_URL=f"http://127.0.0.1:{port}") as server:
        yield server, tmp_path / "daphne.log"


def request_line(path: str, client: str | None = None) -> bytes:
    """A GET of ``path``; from ``client`` as a proxy in front (a trusted one, on loopback)
    says."""
    forwarded = f"X-Forwarded-For: {client}\r\n" if client else ""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{forwarded}\r\n".encode()


def reset_burst(server: str, path: str, count: int, *, clients: int = 1) -> None:
    """``count`` connections that send ``GET path`` and close with a TCP reset (``SO_LINGER``
    0): every other one at once, the others once the answer has begun (within 2 s). From
    ``clients`` addresses in turn (as a proxy in front names them) when more than one."""
    address = (urlsplit(server).hostname, urlsplit(server).port)
    answered: list[socket.socket] = []
    try:
        for number in range(count):
            client = f"203.0.113.{number % clients + 1}" if clients > 1 else None
            sock = socket.create_connection(address, timeout=5)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.sendall(request_line(path, client))
            if number % 2:
                answered.append(sock)
            else:
                sock.close()
        waiting, deadline = list(answered), time.monotonic() + 2
        while waiting and time.monotonic() < deadline:
            readable, _, _ = readable_of(waiting, [], [], 0.1)
            waiting = [sock for sock in waiting if sock not in readable]
    finally:
        for sock in answered:
            sock.close()


def stalled_reader(server: str) -> socket.socket:
    """A client that asks for /ts and never reads (its receive buffer as small as it goes)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(5)
    sock.connect((urlsplit(server).hostname, urlsplit(server).port))
    sock.sendall(request_line("/ts"))
    return sock


def tracebacks(log: Path) -> int:
    return log.read_text(errors="replace").count("Traceback")


def test_a_reset_burst_on_ts_leaves_exactly_the_honest_viewers_and_no_traceback(relaying):
    server, log = relaying
    honest = Viewer(server, want=10**9)
    wait_until(lambda: len(honest.data) > 0, what="the honest viewer's bytes")

    # when 200 connections ask for /ts and reset
    reset_burst(server, "/ts", 200)

    # then the server counts the honest viewer alone, and goes on counting it alone
    wait_until(lambda: status(server)["viewers"] == 1, timeout=5, what="the resets gone")
    time.sleep(1.0)  # ten looks of the load guard
    settled = status(server)
    newcomers = [Viewer(server, want=10**9) for _ in range(3)]
    wait_until(lambda: all(len(v.data) >= 200_000 for v in newcomers), what="newcomers' bytes")
    during = status(server)
    honest_before = len(honest.data)
    wait_until(lambda: len(honest.data) > honest_before + 100_000, what="the honest one goes on")
    honest_on = not honest.ended
    for viewer in [honest, *newcomers]:
        viewer.close()
    wait_until(lambda: status(server)["viewers"] == 0, timeout=5, what="every viewer gone")

    assert (settled["viewers"], settled["refusing_viewers"]) == (1, False)
    assert [viewer.response.status for viewer in newcomers] == [200, 200, 200]
    assert honest_on is True
    # (the burst itself may have been refused while it kept the event loop late)
    assert during["viewers_refused"] == settled["viewers_refused"]
    assert (during["viewers"], during["viewers_shed"]) == (4, 0)
    assert tracebacks(log) == 0


def test_readers_that_never_read_neither_lock_out_honest_viewers_nor_stay(relaying):
    server, log = relaying
    stalled = [stalled_reader(server) for _ in range(8)]
    try:
        wait_until(lambda: status(server)["viewers"] == 8, what="the stalled readers in")
        time.sleep(2.5)  # their sockets back up (a MB each): their writers skip their chunks

        # when ten honest viewers come
        honest = [Viewer(server, want=10**9) for _ in range(10)]
        # counted beside the stalled readers as soon as they are in: the stalled ones are cut
        # off STALLED_VIEWER_SEC after they stopped reading, whatever the honest ones got by then
        wait_until(lambda: all(len(v.data) > 0 for v in honest), what="honest viewers in")
        during = status(server)
        wait_until(lambda: all(len(v.data) >= 200_000 for v in honest), what="honest bytes")

        # then they are all let in and fed; the stalled readers are cut off within the bound
        wait_until(
            lambda: status(server)["viewers"] == 10,
            timeout=STALLED_VIEWER_SEC + 3,
            what="the stalled readers cut off",
        )
        honest_before = [len(viewer.data) for viewer in honest]
        wait_until(
            lambda: all(
                len(v.data) > before + 100_000
                for v, before in zip(honest, honest_before, strict=True)
            ),
            what="the honest ones go on",
        )
        after = status(server)
        honest_on = [not viewer.ended for viewer in honest]
        for viewer in honest:
            viewer.close()
    finally:
        for sock in stalled:
            sock.close()

    assert [viewer.response.status for viewer in honest] == [200] * 10
    assert during["viewers"] == 18
    assert honest_on == [True] * 10
    assert (after["viewers"], after["viewers_refused"], after["viewers_shed"]) == (10, 0, 0)
    assert tracebacks(log) == 0


@contextlib.contextmanager
def demo_streams(server: str, clients: list[str], path: str = "/tv/demo/1.ts") -> Iterator[list]:
    """A GET of ``path`` held open from each of ``clients`` (as a trusted proxy names them);
    yields their answers (status, body of a refusal) and closes them on exit."""
    connections, answers = [], []
    try:
        for client in clients:
            parts = urlsplit(server)
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
            connections.append(connection)
            connection.request("GET", path, headers={"X-Forwarded-For": client})
            response = connection.getresponse()
            body = response.read().decode() if response.status != 200 else ""
            answers.append((response.status, body))
        yield answers
    finally:
        for connection in connections:
            connection.close()


def test_a_reset_burst_on_a_demo_channel_leaves_every_encoder_free(demo_server):
    server, log = demo_server

    # when 60 connections from 20 addresses ask for a demo channel and reset
    reset_burst(server, "/tv/demo/2.ts", 60, clients=20)

    # then the four encoders are free again: four clients get one each, and a fifth none
    clients = [f"198.51.100.{n}" for n in range(1, 6)]
    expected = [(200, "")] * 4 + [
        (503, "this server runs its most demo streams (4): try again shortly")
    ]

    def five_ask() -> bool:
        with demo_streams(server, clients) as answers:
            return answers == expected

    wait_until(five_ask, timeout=5, what=f"{expected} to five clients")
    assert tracebacks(log) == 0


def test_one_client_holds_at_most_its_share_of_the_encoders_and_the_hub_gets_one(demo_server):
    server, log = demo_server

    # when one client asks for four demo streams and holds them
    with demo_streams(server, ["198.51.100.7"] * 4) as answers:
        # then it gets two, and an administrator's switch to a demo channel plays
        select(server, "demo.2")
        wait_until(lambda: not status(server)["transitioning"], what="the demo channel plays")
        played = status(server)
        with requests.get(f"{server}/ts", stream=True, timeout=5) as viewer:
            first = next(viewer.iter_content(65536))

    assert (
        answers
        == [(200, "")] * 2
        + [(503, "this client runs its most demo streams (2): try again shortly")] * 2
    )
    assert (played["live"], played["upstream_down"]) == (True, False)
    assert (viewer.status_code, first[0]) == (200, 0x47)
    assert tracebacks(log) == 0
