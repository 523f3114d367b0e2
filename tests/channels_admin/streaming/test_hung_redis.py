"""A Redis that takes connections and reads commands but never answers (a hung server, a proxy
whose backend is gone): each command of the relay and of the links' audience fails within its
bound, as :class:`RelayError`, which the callers already meet when Redis is down. Before, a
switch's announcement, a viewer's seat and the server's stop waited on it for ever."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from channels_admin.streaming.relay import Relay, RelayError
from channels_admin.streaming.shared_audience import SharedAudience
from loopback_fakes.hung_server import HungServer

BOUND_SEC = 0.5  # the relay's lock and the audience's expiry: each command's bound
HANG_SEC = 5  # past this, a command is taken to hang


@pytest.fixture
def hung():
    with HungServer() as server:
        yield server, server.url


async def failed_within(call) -> tuple[type[BaseException] | None, float]:
    """The exception ``call()`` ended with (None: it returned), and the seconds it took; a
    call still running after :data:`HANG_SEC` fails the test."""
    started = time.monotonic()
    try:
        await asyncio.wait_for(call(), HANG_SEC)
    except TimeoutError:
        pytest.fail(f"{call} still waited on Redis after {HANG_SEC} s")
    except Exception as error:  # what ended it is the result
        return type(error), time.monotonic() - started
    return None, time.monotonic() - started


async def test_each_command_of_the_relay_fails_within_the_lock_time(hung):
    server, url = hung
    relay = Relay(url, prefix="hung", lock_seconds=BOUND_SEC)

    async def followed() -> None:
        await anext(relay.follow("generation"))

    outcomes = {
        "own": await failed_within(relay.own),
        "announce": await failed_within(lambda: relay.announce({"generation": "g"})),
        "publish": await failed_within(lambda: relay.publish("g", b"chunk")),
        "follow": await failed_within(followed),
        "viewers_report": await failed_within(lambda: relay.viewers_report(3)),
    }
    closed = await failed_within(relay.close)

    # each reached Redis (its connection's greeting went unanswered) and failed as when Redis
    # is down, within the bound and a margin
    assert {name: error for name, (error, _) in outcomes.items()} == dict.fromkeys(
        outcomes, RelayError
    )
    assert all(BOUND_SEC * 0.9 <= took <= BOUND_SEC * 2 + 1 for _, took in outcomes.values())
    assert server.received.startswith(b"*2\r\n$5\r\nHELLO\r\n")
    # the stop gives the lease and the counts back as best it can, and ends
    assert closed[0] is None
    assert closed[1] <= BOUND_SEC * 3 + 1


async def test_a_viewers_seat_fails_within_the_expiry(hung):
    server, url = hung
    audience = SharedAudience(url, prefix="hung", identity="process", expiry_seconds=BOUND_SEC)

    error, took = await failed_within(lambda: audience.seat_take(7, cap=2, window=1.0))
    closed = await failed_within(audience.close)

    assert error is RelayError
    assert BOUND_SEC * 0.9 <= took <= BOUND_SEC * 2 + 1
    assert server.received.startswith(b"*2\r\n$5\r\nHELLO\r\n")
    assert closed[0] is None
    assert closed[1] <= BOUND_SEC * 2 + 1


async def test_a_crowd_joining_while_redis_hangs_waits_one_expiry_not_one_each(hung):
    # given a link's seats in a Redis that never answers
    server, url = hung
    audience = SharedAudience(url, prefix="hung", identity="process", expiry_seconds=BOUND_SEC)
    started = time.monotonic()

    # when 50 viewers join at once (their seats taken one at a time, under the process's lock)
    joined = await asyncio.wait_for(
        asyncio.gather(
            *(audience.seat_take(7, cap=2, window=1.0) for _ in range(50)),
            return_exceptions=True,
        ),
        HANG_SEC,
    )
    crowd_took = time.monotonic() - started
    greetings = server.received.count(b"HELLO")

    # then the first waited out the bound and the others were refused at once behind it, Redis
    # asked by the first alone; after the bound, the next join asks Redis again
    assert [type(outcome) for outcome in joined] == [RelayError] * 50
    assert BOUND_SEC * 0.9 <= crowd_took <= BOUND_SEC * 2 + 1
    assert greetings == 1
    await asyncio.sleep(BOUND_SEC)
    error, took = await failed_within(lambda: audience.seat_take(7, cap=2, window=1.0))
    assert (error, server.received.count(b"HELLO")) == (RelayError, 2)
    assert took >= BOUND_SEC * 0.9
    await audience.close()


def test_the_fake_leaves_no_thread_behind_it_whatever_its_clients_keep():
    # given clients that connected to the fake and kept their connections open
    before = threading.active_count()
    with HungServer() as server:
        host, port = server.url.removeprefix("redis://").removesuffix("/0").split(":")
        clients = [socket.create_connection((host, int(port))) for _ in range(3)]
        for client in clients:
            client.sendall(b"PING\r\n")
        deadline = time.monotonic() + HANG_SEC
        while len(server.received) < 18 and time.monotonic() < deadline:
            time.sleep(0.01)
        during = threading.active_count()

    # then its threads (its loop, one a connection) ended with it, and each client was let go
    after = threading.active_count()
    let_go = [client.recv(1) for client in clients]
    for client in clients:
        client.close()
    assert (during - before, after - before) == (4, 0)
    assert let_go == [b""] * 3
