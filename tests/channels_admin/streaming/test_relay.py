"""The relay's Redis side, against a real Redis: the stream of chunks, following, resuming,
the backlog cap, expiry and the viewer counts."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis.asyncio as redis

from channels_admin.streaming.relay import BACKLOG_CHUNKS, CATCH_UP_CHUNKS, Relay, _preceding
from tests.system.test_scale_out import REDIS_URL, needs_redis

pytestmark = needs_redis
LOCK_SEC = 1


@pytest.fixture
async def prefix():
    name = f"test-relay-{uuid.uuid4().hex[:8]}"
    yield name
    keys = redis.Redis.from_url(REDIS_URL)
    found = await keys.keys(f"{name}:*")
    if found:
        await keys.delete(*found)
    await keys.aclose()


@pytest.fixture
async def relays(prefix):
    """An owner and a follower on the same prefix, closed after the test."""
    made = [Relay(REDIS_URL, prefix=prefix, lock_seconds=LOCK_SEC) for _ in range(2)]
    assert await made[0].own() is True
    yield made
    for relay in made:
        await relay.close()


async def taken(chunks, count: int) -> list[bytes]:
    return [await asyncio.wait_for(anext(chunks), 5) for _ in range(count)]


async def test_a_follower_gets_its_switchs_chunks_from_the_start_and_no_others(relays):
    owner, follower = relays
    await owner.publish("old", b"o1")
    await owner.publish("new", b"n1")
    await owner.publish("new", b"n2")

    chunks = follower.follow("new")
    first = await taken(chunks, 2)
    await owner.publish("old", b"o2")  # a straggler of the old stream
    await owner.publish("new", b"n3")
    later = await taken(chunks, 1)
    await chunks.aclose()

    assert first == [b"n1", b"n2"]
    assert later == [b"n3"]


async def test_catching_up_takes_at_most_the_latest_chunks(relays):
    owner, follower = relays
    for index in range(CATCH_UP_CHUNKS + 5):
        await owner.publish("g", b"%d" % index)

    chunks = follower.follow("g")
    caught_up = await taken(chunks, CATCH_UP_CHUNKS)
    await owner.publish("g", b"next")
    following = await taken(chunks, 1)
    await chunks.aclose()

    assert caught_up == [b"%d" % index for index in range(5, CATCH_UP_CHUNKS + 5)]
    assert following == [b"next"]


async def test_following_again_resumes_where_it_stopped_with_nothing_repeated(relays):
    owner, follower = relays
    await owner.publish("g", b"1")
    chunks = follower.follow("g")
    assert await taken(chunks, 1) == [b"1"]
    await chunks.aclose()  # as when Redis fails and the hub follows again
    await owner.publish("g", b"2")  # missed while not reading
    await owner.publish("g", b"3")

    chunks = follower.follow("g")
    resumed = await taken(chunks, 2)
    await chunks.aclose()

    assert resumed == [b"2", b"3"]


async def test_an_owner_that_becomes_a_follower_does_not_repeat_its_own_chunks(relays, prefix):
    old_owner, new_owner = relays
    await old_owner.publish("g", b"mine")
    keys = redis.Redis.from_url(REDIS_URL)
    await keys.delete(f"{prefix}:owner")  # its key ran out (it was frozen, say)
    assert await new_owner.own() is True
    await new_owner.publish("g", b"theirs")

    chunks = old_owner.follow("g")
    followed = await taken(chunks, 1)
    await chunks.aclose()
    await keys.aclose()

    assert followed == [b"theirs"]


async def test_the_stream_keeps_the_backlog_and_expires_without_an_owner(relays, prefix):
    owner, _ = relays
    keys = redis.Redis.from_url(REDIS_URL)
    for index in range(BACKLOG_CHUNKS + 10):
        await owner.publish("g", b"%d" % index)

    length = await keys.xlen(f"{prefix}:ts")
    oldest = (await keys.xrange(f"{prefix}:ts", count=1))[0][1][b"d"]
    ttl = await keys.pttl(f"{prefix}:ts")
    await asyncio.sleep(LOCK_SEC + 0.2)
    left = await keys.exists(f"{prefix}:ts")
    await keys.aclose()

    assert length == BACKLOG_CHUNKS
    assert oldest == b"10"
    assert 0 < ttl <= LOCK_SEC * 1000
    assert left == 0


async def test_following_ends_when_nobody_owns_the_upstream(relays, prefix):
    owner, follower = relays
    await owner.release()

    ended = [chunk async for chunk in follower.follow("g")]

    assert ended == []


async def test_viewer_counts_add_up_and_a_closed_relay_takes_its_own_away(relays, prefix):
    one, two = relays
    await one.viewers_report(3)
    await two.viewers_report(4)
    both = await one.viewers_total()

    await two.close()
    after_close = await one.viewers_total()

    assert both == 7
    assert after_close == 3


async def test_a_count_that_ran_out_is_forgotten(relays, prefix):
    one, two = relays
    await one.viewers_report(3)
    await two.viewers_report(4)
    keys = redis.Redis.from_url(REDIS_URL)
    await keys.delete(f"{prefix}:viewers:{two.identity}")  # as when its expiry passes

    total = await one.viewers_total()
    listed = await keys.smembers(f"{prefix}:viewers")
    await keys.aclose()

    assert total == 3
    assert listed == {one.identity.encode()}


@pytest.mark.parametrize(
    ("entry_id", "preceding"),
    [
        (b"1700000000000-3", b"1700000000000-2"),
        (b"1700000000000-0", b"1699999999999-%d" % (2**64 - 1)),
    ],
)
def test_preceding_entry_id(entry_id, preceding):
    assert _preceding(entry_id) == preceding
