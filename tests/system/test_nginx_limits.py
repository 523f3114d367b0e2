"""The time-outs and per-client limits docs/deploy.md gives nginx, for real: nginx with the
documented blocks (read from the page, its time-outs shortened to 2 s) in front of a real
server. Before, the documented layout set none: 2,000 head dribblers went straight to the
server."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from loopback_fakes.nginx_config import documented_blocks, loopback_conf
from tests.conftest import free_port, running_server
from tests.edge.test_slow_clients import attack
from tests.system.test_deployment_topology import nginx_binary, nginx_started  # noqa: F401

TIMEOUT_SEC = 2
SLACK_SEC = 1.5
CONNECTIONS = 64
RATE, BURST = 50, 100


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> Iterator[tuple[int, Path]]:
    """The real server the tests' fronts stand before, one for the module (each test counts
    what reached it in its log, from before to after): its port and its log."""
    var, port = tmp_path_factory.mktemp("origin-var"), free_port()
    with running_server(var, port=port):
        yield port, var / "daphne.log"


def front_started(
    stack: contextlib.ExitStack, binary: str, tmp_path: Path, origin: tuple[int, Path]
) -> tuple[str, Path]:
    """nginx with the documented blocks in front of ``origin``, until ``stack`` closes: its
    base URL, and the origin's log."""
    http, server = documented_blocks("Slow and greedy clients")
    server = re.sub(r"(client_\w+_timeout) 10s;", rf"\1 {TIMEOUT_SEC}s;", server)
    assert server.count(f" {TIMEOUT_SEC}s;") == 2, server
    ports = {"port": free_port(), "origin": origin[0]}
    work = tmp_path / "nginx"
    work.mkdir()
    front = f"""    access_log {work}/access.log;
{http}
    server {{
        listen 127.0.0.1:{ports["port"]};
{server}
        location / {{ proxy_pass http://127.0.0.1:{ports["origin"]}; }}
    }}"""
    conf = loopback_conf(work, events="worker_connections 1024;", http=front)
    (work / "nginx.conf").write_text(conf)
    return nginx_started(stack, binary, work, ports["port"]), origin[1]


def test_dribblers_are_closed_by_nginx_and_never_reach_the_server(nginx_binary, origin, tmp_path):  # noqa: F811
    with contextlib.ExitStack() as stack:
        front, origin_log = front_started(stack, nginx_binary, tmp_path, origin)
        before = origin_log.read_text().count('"POST /graphql"')
        heads = attack(
            front, first=b"GET /healthz HTTP/1.1\r\nHost: x\r\n", drip=b"X", every=0.5, limit=8
        )
        bodies = attack(
            front,
            first=b"POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n{",
            drip=b"",
            every=1,
            limit=8,
            count=20,
        )
        after = origin_log.read_text().count('"POST /graphql"')

    # nginx closes a head that does not come, and a body that stalls, without a word (its log
    # says 408)
    assert {client.received for client in heads + bodies} == {b""}
    assert max(client.closed_after for client in heads) < TIMEOUT_SEC + SLACK_SEC
    assert max(client.closed_after for client in bodies) < TIMEOUT_SEC + SLACK_SEC
    assert after == before  # none reached the server


def test_one_address_past_its_connections_is_answered_429(nginx_binary, origin, tmp_path):  # noqa: F811
    with contextlib.ExitStack() as stack:
        front, _ = front_started(stack, nginx_binary, tmp_path, origin)
        # bodies declared and never sent: each holds its connection until the body time-out
        clients = attack(
            front,
            first=b"POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
            drip=b"",
            every=1,
            limit=8,
            count=CONNECTIONS + 36,
        )

    # past its 64, each is answered 429 (and closed once nginx's lingering for the body it
    # declared is over); the 64 are closed at the body time-out
    statuses = collections.Counter(client.received.split(b"\r\n", 1)[0] for client in clients)
    assert statuses == {b"": CONNECTIONS, b"HTTP/1.1 429 Too Many Requests": 36}
    held = [client.closed_after for client in clients if not client.received]
    assert min(held) >= TIMEOUT_SEC - 0.1
    assert max(held) < TIMEOUT_SEC + SLACK_SEC


def test_one_address_past_its_request_rate_is_answered_429(nginx_binary, origin, tmp_path):  # noqa: F811
    with contextlib.ExitStack() as stack:
        front, origin_log = front_started(stack, nginx_binary, tmp_path, origin)
        before = origin_log.read_text().count('"GET /healthz"')
        began = time.monotonic()

        refused = threading.Event()

        def client(_: int) -> list[int]:
            # until some are refused (at most 100 each): under the suite's load, 400 requests
            # once took as long as the rate lets that many through
            codes = []
            with requests.Session() as session:
                while len(codes) < 100 and not refused.is_set():
                    codes.append(session.get(f"{front}/healthz", timeout=10).status_code)
                    if codes[-1] == 429:
                        refused.set()
            return codes

        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            answers = collections.Counter(
                code for codes in pool.map(client, range(20)) for code in codes
            )
        seconds = time.monotonic() - began
        time.sleep(0.5)
        served = origin_log.read_text().count('"GET /healthz"') - before

    # requests from one address as fast as they go: the burst and the rate pass, the rest 429
    assert set(answers) == {200, 429}
    assert answers[200] == served
    assert BURST <= served <= BURST + RATE * seconds + 1
