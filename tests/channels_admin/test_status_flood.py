"""A WebSocket flood against the real server (issue 47): each connection has a budget of
messages, and the first past it closes the connection with 1008, so that one client's flood
leaves the other requests at most twice as slow as they are calm.

Before, three connections sending ``{"type": "refresh"}`` as fast as they could held
``/healthz`` and every other request back by 24 s: each refresh was answered. Then, with the
budget taken in the consumer, a flood that wrote frames faster than the consumer answered was
never closed: the close waited behind every frame daphne had queued.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import itertools
import json
import multiprocessing
import os
import select
import socket
import statistics
import struct
import time
from pathlib import Path

import pytest
import requests
import websockets
import websockets.sync.client

from core.message_budget import POLICY_VIOLATION
from tests.conftest import free_port, running_server, server_pid

REFRESH = json.dumps({"type": "refresh"})
ATTACKERS = 3
FLOOD_SEC = 3.0  # a bound: each attacker stops by then if the server never closes it
FLOOD_MESSAGES = 1000  # and after this many
HONEST_REQUESTS = 20
# The suite's workers share the cores with the server: a calm median of 5 ms met 11 ms once during
# a flood that was closed at once. The defect this guards against held /healthz for seconds.
SLACK_SEC = 0.05
AFTERMATH_SEC = 2.0


@pytest.fixture(scope="module")
def flood_var(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("flood-var")


@pytest.fixture(scope="module")
def server(flood_var):
    # the default budget (10/m), as a deployment has it; on a port named, to find its process
    with running_server(flood_var, port=free_port()) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def small_budget_server(tmp_path_factory):
    with running_server(
        tmp_path_factory.mktemp("budget-var"), WEBSOCKET_MESSAGE_BUDGET="5/h"
    ) as base_url:
        yield base_url


def feed_url(server: str) -> str:
    return server.replace("http", "ws") + "/ws/tv/status"


async def flood(server: str) -> tuple[int, int | None]:
    """One attacker: refreshes as fast as the socket takes them, its answers read beside them
    (so that the server's close is seen), until the server closes it or it has sent
    FLOOD_MESSAGES or spent FLOOD_SEC; how many answers came, and the server's close code."""
    async with websockets.connect(feed_url(server), origin=server) as feed:
        answers = 0

        async def read() -> None:
            nonlocal answers
            with contextlib.suppress(websockets.ConnectionClosed):
                async for _ in feed:
                    answers += 1

        reader = asyncio.create_task(read())
        deadline, sent = time.monotonic() + FLOOD_SEC, 0
        with contextlib.suppress(websockets.ConnectionClosed, ConnectionError):
            for _ in range(FLOOD_MESSAGES):
                if time.monotonic() > deadline or reader.done():
                    break
                await feed.send(REFRESH)
                sent += 1
                if sent % 20 == 0:
                    await asyncio.sleep(0)  # let the reader take what came
        # the server closes a connection past its budget at once; else stop reading
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), 2)
        reader.cancel()
        return answers, closed_by_server(feed)


def flood_all(server: str) -> list[tuple[int, int | None]]:
    """:func:`flood` by each of the ATTACKERS at once."""

    async def all_of_them() -> list[tuple[int, int | None]]:
        return list(await asyncio.gather(*(flood(server) for _ in range(ATTACKERS))))

    return asyncio.run(all_of_them())


def closed_by_server(feed: websockets.ClientConnection) -> int | None:
    """The code of the close the server sent (``None``: it sent none)."""
    received = feed.protocol.close_rcvd
    return None if received is None else received.code


def healthz_latencies(server: str, count: int) -> list[float]:
    http = requests.Session()
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        assert http.get(f"{server}/healthz", timeout=60).status_code == 200
        latencies.append(time.perf_counter() - started)
    return latencies


async def test_a_connection_past_its_budget_is_closed_with_1008(small_budget_server):
    server = small_budget_server
    async with websockets.connect(feed_url(server), origin=server) as feed:
        await asyncio.wait_for(feed.recv(), 5)  # the status sent on connecting
        with contextlib.suppress(websockets.ConnectionClosed, ConnectionError):
            for _ in range(20):
                await feed.send(REFRESH)
        answers = []
        with contextlib.suppress(websockets.ConnectionClosed):
            while True:
                answers.append(json.loads(await asyncio.wait_for(feed.recv(), 5)))

    # the close went out as the 6th frame arrived: at most the budget's 5 refreshes answered
    # (those the consumer had answered by then), none after it
    assert len(answers) <= 5
    assert closed_by_server(feed) == POLICY_VIOLATION
    # another connection has a budget of its own
    async with websockets.connect(feed_url(server), origin=server) as other:
        await asyncio.wait_for(other.recv(), 5)
        await other.send(REFRESH)
        assert "live" in json.loads(await asyncio.wait_for(other.recv(), 5))


def test_a_flood_of_refreshes_leaves_other_requests_within_twice_their_calm_latency(server):
    # given: /healthz, calm
    healthz_latencies(server, 5)  # warm
    calm = statistics.median(healthz_latencies(server, HONEST_REQUESTS))

    # when: three connections flood the status feed while an honest client asks /healthz
    # (in a process of its own, so that its loop takes nothing from the honest client's)
    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn")
    ) as attackers:
        attackers.submit(int).result()  # the process started before the clock
        attack = attackers.submit(flood_all, server)
        # over the whole time the attackers would flood, and what the server has left after it
        latencies: list[float] = []
        window = time.monotonic() + FLOOD_SEC + AFTERMATH_SEC
        while time.monotonic() < window or len(latencies) < HONEST_REQUESTS:
            latencies += healthz_latencies(server, 1)
        outcomes = attack.result(timeout=120)
    during = statistics.median(latencies)

    # then: the honest requests kept their pace, and each flood was closed with 1008 as its
    # 11th refresh arrived, past the default budget of 10 (at most those 10 and the status sent
    # on connecting answered)
    assert during <= 2 * calm + SLACK_SEC, (during, calm, len(latencies))
    assert [(answers <= 11, code) for answers, code in outcomes] == [
        (True, POLICY_VIOLATION)
    ] * ATTACKERS, outcomes


# A flood that never waits: frames written as fast as the socket takes them, the server's frames
# read beside them only to find its close.

RAW_FLOOD_SEC = 4.0
CLOSE_WITHIN_SEC = 2.0
IDLE_AFTER_SEC = 2.0
MASK = b"\x1f\x2e\x3d\x4c"
MASKED_REFRESH = bytes(byte ^ MASK[i % 4] for i, byte in enumerate(REFRESH.encode()))
# a text frame, final, masked (as a client's must be); 2,000 of them per write
FRAMES = (b"\x81" + bytes([0x80 | len(MASKED_REFRESH)]) + MASK + MASKED_REFRESH) * 2000


def raw_connect(server: str) -> tuple[socket.socket, bytes]:
    """A WebSocket to the status feed, opened by hand; the socket and what came after the head."""
    host, port = server.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    key = base64.b64encode(os.urandom(16))
    sock.sendall(
        b"GET /ws/tv/status HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nOrigin: %s\r\n\r\n"
        % (server.removeprefix("http://").encode(), key, server.encode())
    )
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock, rest


def close_code(data: bytes) -> int | None:
    """The code of the close frame among the server's (unmasked) frames in ``data``, if one
    has arrived whole."""
    while len(data) >= 2:
        opcode, length, at = data[0] & 0x0F, data[1] & 0x7F, 2
        if length == 126:
            (length,), at = struct.unpack("!H", data[2:4]), 4
        elif length == 127:
            (length,), at = struct.unpack("!Q", data[2:10]), 10
        if len(data) < at + length:
            return None
        if opcode == 8:
            return struct.unpack("!H", data[at : at + 2])[0]
        data = data[at + length :]
    return None


def raw_flood(server: str) -> tuple[float | None, int | None, int]:
    """One attacker, for RAW_FLOOD_SEC or until the server drops it: how long after its start
    the server's close arrived, its code, and the bytes of frames written."""
    sock, received = raw_connect(server)
    sock.setblocking(False)
    started = time.monotonic()
    closed_at = code = None
    written = 0
    with sock, contextlib.suppress(ConnectionError):
        while time.monotonic() < started + RAW_FLOOD_SEC:
            readable, writable, _ = select.select([sock], [sock], [], 0.1)
            if readable:
                data = sock.recv(65536)
                if not data:
                    break
                received += data
                if code is None and (code := close_code(received)) is not None:
                    closed_at = time.monotonic() - started
            if writable:
                with contextlib.suppress(BlockingIOError):
                    written += sock.send(FRAMES)
    return closed_at, code, written


def raw_flood_all(server: str) -> list[tuple[float | None, int | None, int]]:
    """:func:`raw_flood` by each of the ATTACKERS at once, a thread each."""
    with concurrent.futures.ThreadPoolExecutor(ATTACKERS) as threads:
        return list(threads.map(raw_flood, [server] * ATTACKERS))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_flood_that_never_waits_is_closed_at_once_and_leaves_the_server_idle(server):
    # given: /healthz, calm
    pid = server_pid(server)
    healthz_latencies(server, 5)  # warm
    calm = statistics.median(healthz_latencies(server, HONEST_REQUESTS))

    # when: three connections write refreshes without reading, as fast as their sockets take
    # them, while an honest client asks /healthz (the attackers in a process of their own)
    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn")
    ) as attackers:
        attackers.submit(int).result()  # the process started before the clock
        attack = attackers.submit(raw_flood_all, server)
        latencies: list[float] = []
        while not attack.done() or len(latencies) < HONEST_REQUESTS:
            latencies += healthz_latencies(server, 1)
        outcomes = attack.result()
    ended = time.monotonic()
    during = statistics.median(latencies)
    time.sleep(max(0.0, ended + IDLE_AFTER_SEC - time.monotonic()))
    before = cpu_seconds(pid)
    time.sleep(1)
    after_idle = cpu_seconds(pid) - before

    # then: each connection was closed with 1008 within CLOSE_WITHIN_SEC of its start, the
    # honest requests kept their pace, and the server was idle again IDLE_AFTER_SEC after
    assert [
        (code, closed_at is not None and closed_at < CLOSE_WITHIN_SEC)
        for closed_at, code, _ in outcomes
    ] == [(POLICY_VIOLATION, True)] * ATTACKERS, outcomes
    assert during <= 2 * calm + SLACK_SEC, (during, calm, len(latencies))
    assert after_idle < 0.1, after_idle


# An address of its own for each connection of flood_again (behind the trusted proxy): one
# address connecting again and again is refused past WEBSOCKET_CONNECTS_PER_CLIENT
# (tests/edge/test_websocket_admission.py); the consumers closed under are the point here.
ADDRESSES = (f"2001:db8::{number:x}" for number in itertools.count(1))


def flood_again(server: str, until: float) -> list[int | None]:
    """One attacker for as long as ``until`` (monotonic): open a connection, send a burst of
    refreshes without waiting, read until the server closes it, and again; each close code."""
    codes: list[int | None] = []
    while time.monotonic() < until:
        with websockets.sync.client.connect(
            feed_url(server), origin=server, additional_headers={"X-Forwarded-For": next(ADDRESSES)}
        ) as feed:
            try:
                for _ in range(200):
                    feed.send(REFRESH)
                while True:
                    feed.recv(timeout=5)
            except websockets.ConnectionClosed as closed:
                codes.append(closed.rcvd.code if closed.rcvd else None)
    return codes


def test_connections_closed_under_their_consumer_cost_no_traceback(server, flood_var) -> None:
    # when: three attackers open connection after connection for 3 s, each flooding at once
    # (with the server busy, a consumer often sends its first status after the client has
    # answered the 1008: "Attempt to send on a closed protocol", 80 tracebacks in 4 s before)
    until = time.monotonic() + 3
    with concurrent.futures.ThreadPoolExecutor(ATTACKERS) as threads:
        rounds = list(threads.map(flood_again, [server] * ATTACKERS, [until] * ATTACKERS))

    # then: every connection was closed with 1008, and what a consumer still sent to one
    # closed under it was dropped, not raised
    codes = [code for codes in rounds for code in codes]
    assert len(codes) >= ATTACKERS
    assert set(codes) == {POLICY_VIOLATION}
    assert "Traceback" not in (flood_var / "daphne.log").read_text(errors="replace")
