"""The Redis lease against a real Redis: one holder at a time, renewed by its holder only,
given back by its holder only, and taken by another once it runs out; the relay's ownership
shares the holder's client and name."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as redis

from core.redis_lease import RedisLease
from tests.channels_admin.streaming.test_relay import prefix  # noqa: F401 (fixture)
from tests.system.test_scale_out import REDIS_URL, needs_redis

pytestmark = needs_redis
SECONDS = 0.5


@pytest.fixture
def key(prefix):  # noqa: F811 (the relay tests' prefix: its keys are deleted after the test)
    return f"{prefix}:lease"


async def test_one_holder_at_a_time_until_its_lease_runs_out(key):
    one = RedisLease.at(REDIS_URL, key=key, seconds=SECONDS)
    two = RedisLease.at(REDIS_URL, key=key, seconds=SECONDS)
    try:
        held = [await one.hold(), await two.hold(), await one.hold()]
        holder = await two.holder()
        await two.release()  # not its lease: nothing given back
        still = await one.holder()
        await asyncio.sleep(SECONDS * 1.5)  # one stops renewing, as a dead process does
        taken = await two.hold()
        lost = await one.hold()
    finally:
        await one.close()
        await two.close()

    assert held == [True, False, True]
    assert holder == still == one.identity
    assert (taken, lost) == (True, False)


async def test_a_lease_on_a_shared_client_leaves_it_open_and_gives_its_key_back(key):
    client = redis.Redis.from_url(REDIS_URL)
    lease = RedisLease(client, key=key, seconds=SECONDS, identity="host:1:abc")
    try:
        assert await lease.hold() is True
        assert await client.get(key) == b"host:1:abc"
        await lease.close()
        assert await client.get(key) is None  # given back, and the client still answers
    finally:
        await client.aclose()
