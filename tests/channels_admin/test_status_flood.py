"""A WebSocket flood against the real server (issue 47): each connection has a budget of
messages, and the first past it closes the connection with 1008, so that one client's flood
leaves the other requests at most twice as slow as they are calm.

Before, three connections sending ``{"type": "refresh"}`` as fast as they could held
``/healthz`` and every other request back by 24 s: each refresh was answered.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import multiprocessing
import statistics
import time

import pytest
import requests
import websockets

from core.message_budget import POLICY_VIOLATION, MessageBudgetMixin
from tests.conftest import running_server

REFRESH = json.dumps({"type": "refresh"})
ATTACKERS = 3
FLOOD_SEC = 3.0  # a bound: each attacker stops by then if the server never closes it
FLOOD_MESSAGES = 1000  # and after this many
HONEST_REQUESTS = 20
AFTERMATH_SEC = 2.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # the default budget (10/m), as a deployment has it
    with running_server(tmp_path_factory.mktemp("flood-var")) as base_url:
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


def test_every_websocket_route_has_a_message_budget():
    from channels_admin import routing  # here: the attackers' process has no Django set up

    consumers = [route.callback.consumer_class for route in routing.websocket_urlpatterns]

    assert consumers  # the status feed at least
    assert [c for c in consumers if not issubclass(c, MessageBudgetMixin)] == []


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

    # exactly the budget's 5 refreshes answered, then the close
    assert len(answers) == 5
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

    # then: the honest requests kept their pace, and each flood was closed with 1008 after the
    # default budget of 10 refreshes (and the status sent on connecting)
    assert during <= 2 * calm, (during, calm, len(latencies))
    assert outcomes == [(11, POLICY_VIOLATION)] * ATTACKERS
