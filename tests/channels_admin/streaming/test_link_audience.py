"""A viewer link's audience, counted for its cap: in one process's memory, and across processes
in a real Redis (two audiences standing for two processes): ``/ts`` seats and HLS clients under
one cap, a counted HLS client never refused, a dead process's seats running out, a crowd racing
for the last seats, and the bounds on what is kept."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import redis.asyncio as redis

from channels_admin.streaming.link_audience import HLS_CLIENTS_PER_LINK, LocalAudience
from channels_admin.streaming.relay import RelayError
from channels_admin.streaming.shared_audience import SharedAudience
from tests.conftest import free_port
from tests.system.test_scale_out import REDIS_URL, needs_redis

EXPIRY_SEC = 1
WINDOW = 6.0
LINK = 7


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def until(predicate, what: str, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} not met within {within}s")


@pytest.fixture
async def prefix():
    name = f"test-audience-{uuid.uuid4().hex[:8]}"
    yield name
    keys = redis.Redis.from_url(REDIS_URL)
    found = await keys.keys(f"{name}:*")
    if found:
        await keys.delete(*found)
    await keys.aclose()


@pytest.fixture
async def shared(prefix):
    """Two processes' audiences on one Redis, closed after the test."""
    made = [
        SharedAudience(REDIS_URL, prefix=prefix, identity=f"p{n}", expiry_seconds=EXPIRY_SEC)
        for n in range(2)
    ]
    yield made
    for audience in made:
        await audience.close()


# -- this process alone ---------------------------------------------------------------------


async def test_local_seats_and_hls_clients_share_the_cap():
    clock = Clock()
    audience = LocalAudience(clock=clock)

    assert await audience.seat_take(LINK, cap=3, window=WINDOW) is True
    assert await audience.hls_admit(LINK, "203.0.113.1", cap=3, window=WINDOW) is True
    assert await audience.hls_admit(LINK, "203.0.113.2", cap=3, window=WINDOW) is True
    full_seat = await audience.seat_take(LINK, cap=3, window=WINDOW)
    full_hls = await audience.hls_admit(LINK, "203.0.113.3", cap=3, window=WINDOW)
    reload = await audience.hls_admit(LINK, "203.0.113.1", cap=3, window=WINDOW)

    assert (full_seat, full_hls, reload) == (False, False, True)
    assert await audience.counts([LINK, 8], window=WINDOW) == {LINK: (1, 2), 8: (0, 0)}
    # a client that stops reloading for the window frees its place
    clock.now += 4
    assert await audience.hls_admit(LINK, "203.0.113.1", cap=3, window=WINDOW) is True
    clock.now += 2
    assert await audience.hls_admit(LINK, "203.0.113.3", cap=3, window=WINDOW) is True
    assert await audience.counts([LINK], window=WINDOW) == {LINK: (1, 2)}
    await audience.seat_give(LINK)
    assert await audience.seat_take(LINK, cap=3, window=WINDOW) is True


async def test_local_hls_clients_are_kept_within_their_bounds():
    clock = Clock()
    audience = LocalAudience(clock=clock, per_link=3, kept=5)

    clients = [(1, f"10.0.0.{n}") for n in range(5)] + [(2, f"10.0.1.{n}") for n in range(4)]
    answers = [await audience.hls_admit(*c, cap=None, window=WINDOW) for c in clients]

    assert answers == [True] * 9
    # three per link; five in all, the oldest gone first
    assert await audience.counts([1, 2], window=WINDOW) == {1: (0, 2), 2: (0, 3)}
    assert len(audience._clients) == 5


# -- every process, in Redis ----------------------------------------------------------------


@needs_redis
async def test_seats_of_two_processes_share_one_cap_and_a_seat_given_back_frees_one(shared):
    one, two = shared

    taken = [
        await one.seat_take(LINK, cap=2, window=WINDOW),
        await two.seat_take(LINK, cap=2, window=WINDOW),
        await one.seat_take(LINK, cap=2, window=WINDOW),
        await two.seat_take(LINK, cap=2, window=WINDOW),
    ]
    counted = await two.counts([LINK], window=WINDOW)
    await one.seat_give(LINK)

    assert taken == [True, True, False, False]
    assert counted == {LINK: (2, 0)}
    assert await two.seat_take(LINK, cap=2, window=WINDOW) is True
    assert await one.counts([LINK, LINK + 1], window=WINDOW) == {LINK: (2, 0), LINK + 1: (0, 0)}


@needs_redis
async def test_hls_clients_and_seats_of_two_processes_share_one_cap(shared):
    one, two = shared

    assert await one.hls_admit(LINK, "203.0.113.1", cap=2, window=WINDOW) is True
    assert await two.seat_take(LINK, cap=2, window=WINDOW) is True
    refused_hls = await two.hls_admit(LINK, "203.0.113.2", cap=2, window=WINDOW)
    refused_seat = await one.seat_take(LINK, cap=2, window=WINDOW)
    reloads = [await two.hls_admit(LINK, "203.0.113.1", cap=2, window=WINDOW) for _ in range(3)]

    assert (refused_hls, refused_seat, reloads) == (False, False, [True] * 3)
    assert await one.counts([LINK], window=WINDOW) == {LINK: (1, 1)}


@needs_redis
async def test_an_hls_client_that_stops_reloading_frees_its_place_after_the_window(shared):
    one, two = shared

    assert await one.hls_admit(LINK, "203.0.113.1", cap=1, window=0.5) is True
    assert await two.hls_admit(LINK, "203.0.113.2", cap=1, window=0.5) is False

    began = time.monotonic()
    await until(
        lambda: two.hls_admit(LINK, "203.0.113.2", cap=1, window=0.5), what="B counted instead"
    )
    assert 0.3 < time.monotonic() - began < 1.5
    assert await one.counts([LINK], window=0.5) == {LINK: (0, 1)}


@needs_redis
async def test_a_dead_processs_seats_run_out_with_its_expiry(shared, prefix):
    one, two = shared
    assert await one.seat_take(LINK, cap=1, window=WINDOW) is True
    # the process dies: nothing renews its seats any more (and nothing gives them back)
    one._renewer.cancel()
    assert await two.seat_take(LINK, cap=1, window=WINDOW) is False

    began = time.monotonic()
    await until(lambda: two.seat_take(LINK, cap=1, window=WINDOW), what="the seat free again")

    assert EXPIRY_SEC - 0.2 < time.monotonic() - began < EXPIRY_SEC + 1
    keys = redis.Redis.from_url(REDIS_URL)
    assert await keys.smembers(f"{prefix}:link:{LINK}:seats") == {b"p1"}
    await keys.aclose()


@needs_redis
async def test_a_live_processs_seats_outlast_their_expiry_by_renewal(shared):
    one, two = shared
    assert await one.seat_take(LINK, cap=1, window=WINDOW) is True

    await asyncio.sleep(EXPIRY_SEC * 2.5)  # the renewals must have happened: nothing to wait on

    assert await two.seat_take(LINK, cap=1, window=WINDOW) is False
    assert await two.counts([LINK], window=WINDOW) == {LINK: (1, 0)}


@needs_redis
async def test_a_crowd_racing_for_a_capped_link_on_two_processes_takes_the_cap(shared):
    one, two = shared

    taken = await asyncio.gather(
        *(
            (one if n % 2 else two).seat_take(LINK, cap=5, window=WINDOW)
            if n % 3
            else (one if n % 2 else two).hls_admit(LINK, f"10.0.0.{n}", cap=5, window=WINDOW)
            for n in range(200)
        )
    )

    assert sum(taken) == 5
    seats, hls = (await one.counts([LINK], window=WINDOW))[LINK]
    assert seats + hls == 5


@needs_redis
async def test_a_links_hls_clients_are_kept_within_their_bound_in_redis(shared, prefix):
    one, _ = shared
    keys = redis.Redis.from_url(REDIS_URL)
    hls = f"{prefix}:link:{LINK}:hls"
    # as if the bound were reached within the last second: one client more trims the oldest
    second_ago = time.time() * 1000 - 1000
    await keys.zadd(
        hls,
        {f"10.1.{n // 256}.{n % 256}": second_ago + n / 100 for n in range(HLS_CLIENTS_PER_LINK)},
    )

    assert await one.hls_admit(LINK, "203.0.113.1", cap=None, window=WINDOW) is True

    assert await keys.zcard(hls) == HLS_CLIENTS_PER_LINK
    assert await keys.zscore(hls, "203.0.113.1") is not None
    assert await keys.zscore(hls, "10.1.0.0") is None  # the oldest went
    assert 0 < await keys.pttl(hls) <= WINDOW * 1000
    await keys.aclose()


@needs_redis
async def test_closing_gives_the_seats_back(shared, prefix):
    one, two = shared
    assert await one.seat_take(LINK, cap=1, window=WINDOW) is True

    await one.close()

    assert await two.seat_take(LINK, cap=1, window=WINDOW) is True
    keys = redis.Redis.from_url(REDIS_URL)
    assert await keys.exists(f"{prefix}:link:{LINK}:seats:p0") == 0
    await keys.aclose()


async def test_an_unreachable_redis_is_a_relay_error():
    audience = SharedAudience(
        f"redis://127.0.0.1:{free_port()}/0", prefix="x", identity="p", expiry_seconds=1
    )
    try:
        with pytest.raises(RelayError):
            await audience.seat_take(LINK, cap=1, window=WINDOW)
        with pytest.raises(RelayError):
            await audience.hls_admit(LINK, "203.0.113.1", cap=1, window=WINDOW)
        with pytest.raises(RelayError):
            await audience.counts([LINK], window=WINDOW)
    finally:
        await audience.close()
