"""Slow clients are timed out by the real server: a head that dribbles in, a body that stalls
or crawls, a connection that sends nothing. Before, 2,000 head dribblers were all still open after
93 s, and 500 bodies sending a byte every 20 s after 100 s.

The server runs with bounds of a second or two (SERVER_HEAD_TIMEOUT_SEC, SERVER_BODY_IDLE_SEC,
SERVER_BODY_MIN_RATE); each attack is many connections at once, each answered 408 (or, having
sent nothing, closed without a word) and closed within its bound and a second of slack, while an
honest request meanwhile is served.
"""

from __future__ import annotations

import json
import selectors
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from tests.conftest import running_server

CONNECTIONS = 50
HEAD_SEC = 2
BODY_IDLE_SEC = 1
MIN_RATE = 1024
SLACK_SEC = 1.5
PING = json.dumps({"query": 'query { ping(input: {sessionId: "none"}) { success } }'}).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    var_dir = tmp_path_factory.mktemp("slow-clients")
    with running_server(
        var_dir,
        SERVER_HEAD_TIMEOUT_SEC=str(HEAD_SEC),
        SERVER_BODY_IDLE_SEC=str(BODY_IDLE_SEC),
        SERVER_BODY_MIN_RATE=str(MIN_RATE),
    ) as url:
        yield url, var_dir / "daphne.log"


@dataclass
class Client:
    sock: socket.socket
    opened: float
    received: bytes = b""
    closed_after: float | None = None
    sent: int = 0
    errors: list[str] = field(default_factory=list)


def attack(
    server: str, *, first: bytes, drip: bytes, every: float, limit: float, count: int = CONNECTIONS
) -> list[Client]:
    """``count`` connections that each send ``first``, then ``drip`` every ``every`` seconds
    (nothing if empty), until the server closes them or ``limit`` seconds pass; each with what
    it received and when it was closed."""
    host, port = server.removeprefix("http://").split(":")
    selector = selectors.DefaultSelector()
    clients = []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)), timeout=5)
        sock.setblocking(False)
        client = Client(sock, time.monotonic())
        if first:
            sock.send(first)
        selector.register(sock, selectors.EVENT_READ, client)
        clients.append(client)
    start = time.monotonic()
    next_drip = start + every
    while time.monotonic() - start < limit and any(c.closed_after is None for c in clients):
        for key, _ in selector.select(timeout=0.05):
            client = key.data
            try:
                data = client.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            client.received += data
            if not data:
                client.closed_after = time.monotonic() - client.opened
                selector.unregister(client.sock)
        if drip and time.monotonic() >= next_drip:
            next_drip += every
            for client in clients:
                if client.closed_after is None:
                    try:
                        client.sock.send(drip)
                        client.sent += len(drip)
                    except OSError as error:
                        client.errors.append(repr(error))
    selector.close()
    for client in clients:
        client.sock.close()
    return clients


def timeout_answer(text: str) -> bytes:
    body = text.encode()
    return (
        b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    )


def healthz_seconds(server: str) -> float:
    began = time.monotonic()
    assert requests.get(f"{server}/healthz", timeout=5).status_code == 200
    return time.monotonic() - began


def test_head_dribblers_are_answered_408_and_closed_within_the_head_bound(server) -> None:
    url, log = server
    # given connections that send a request line, then a header byte every half second
    clients = attack(
        url,
        first=b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n",
        drip=b"X",
        every=0.5,
        limit=HEAD_SEC + 5,
    )

    # then each got the 408 and was closed within the bound, though it never stopped sending
    assert {client.received for client in clients} == {
        timeout_answer(f"the request head did not arrive within {HEAD_SEC} s\n")
    }
    assert max(client.closed_after for client in clients) < HEAD_SEC + SLACK_SEC
    assert min(client.closed_after for client in clients) >= HEAD_SEC - 0.1
    assert "Traceback" not in log.read_text()
    assert healthz_seconds(url) < 1


def test_connections_that_send_nothing_are_closed_without_a_word(server) -> None:
    url, _ = server

    clients = attack(url, first=b"", drip=b"", every=1, limit=HEAD_SEC + 5)

    assert {client.received for client in clients} == {b""}
    assert max(client.closed_after for client in clients) < HEAD_SEC + SLACK_SEC


def test_a_kept_alive_connection_is_closed_once_idle_for_the_head_bound(server) -> None:
    url, _ = server
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=HEAD_SEC + 5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        answer = b""
        while b'"status"' not in answer:
            answer += sock.recv(65536)
        answered = time.monotonic()
        rest = sock.recv(65536)  # nothing more is sent: the server closes
        idle = time.monotonic() - answered

    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert rest == b""
    assert HEAD_SEC - 0.1 <= idle < HEAD_SEC + SLACK_SEC


def test_stalled_bodies_are_answered_408_within_the_idle_bound(server) -> None:
    url, log = server
    # given POSTs that declare 70 MB and send a byte every 3 s (the probe's, every 20 s)
    clients = attack(
        url,
        first=b"POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 70000000\r\n\r\n{",
        drip=b" ",
        every=3,
        limit=BODY_IDLE_SEC + 5,
    )

    assert {client.received for client in clients} == {
        timeout_answer(f"the request body stalled: no byte for {BODY_IDLE_SEC} s\n")
    }
    assert max(client.closed_after for client in clients) < BODY_IDLE_SEC + SLACK_SEC
    assert "Traceback" not in log.read_text()


def test_crawling_bodies_are_answered_408_below_the_minimum_rate(server) -> None:
    url, _ = server
    # given bodies that never stall past the idle bound, but bring 10 bytes every 0.3 s
    clients = attack(
        url,
        first=b"POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000000\r\n\r\n",
        drip=b" " * 10,
        every=0.3,
        limit=8,
        count=10,
    )

    # then past the idle bound's grace and the few bytes they brought, each is cut
    assert {client.received for client in clients} == {
        timeout_answer(f"the request body arrived slower than {MIN_RATE} bytes a second\n")
    }
    assert max(client.closed_after for client in clients) < BODY_IDLE_SEC + SLACK_SEC
    assert healthz_seconds(url) < 1


def test_an_honest_body_sent_in_pieces_within_the_bounds_is_served(server) -> None:
    url, _ = server
    host, port = url.removeprefix("http://").split(":")
    body = PING + b" " * (4 * MIN_RATE - len(PING))
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        # a piece every half second, at twice the minimum rate, for two seconds
        for offset in range(0, len(body), MIN_RATE):
            sock.sendall(body[offset : offset + MIN_RATE])
            time.sleep(0.5)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk

    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert answer.endswith(b'{"data":{"ping":{"success":false}}}')
