"""The hub's building blocks: packet alignment, the bounded viewer buffer, what a viewer lost,
and cutting viewers off."""

from __future__ import annotations

import asyncio
import time

from channels_admin.streaming.hub import Hub
from channels_admin.streaming.subscription import NOT_READING_SEC, Subscription
from channels_admin.streaming.ts import TS_PACKET, PacketAligner


def packets(count: int, start: int = 0) -> bytes:
    return b"".join(
        bytes([0x47, n % 256]) + bytes(TS_PACKET - 2) for n in range(start, start + count)
    )


async def drain(subscription):
    while (chunk := await subscription.next_data()) is not None:
        yield chunk


def test_aligner_skips_leading_garbage_and_holds_partial_packets():
    aligner = PacketAligner()
    stream = b"HTTP junk" + packets(5)

    first = aligner.feed(stream[:500])
    second = aligner.feed(stream[500:])

    assert first == packets(2)
    assert second == packets(3, start=2)
    assert aligner.skipped == 9


def test_aligner_resyncs_after_corruption():
    aligner = PacketAligner()
    aligner.feed(packets(3))

    out = aligner.feed(b"\x00" * 100 + packets(4, start=3))

    assert out == packets(4, start=3)
    assert aligner.skipped == 100


def test_aligner_emits_nothing_for_data_without_sync():
    aligner = PacketAligner()

    out = aligner.feed(bytes(10_000))

    assert out == b""
    assert aligner.skipped == 10_000 - 2 * TS_PACKET


async def test_subscription_drops_the_oldest_chunks_beyond_its_limit():
    subscription = Subscription(limit_bytes=3 * TS_PACKET)
    for n in range(5):
        subscription.push(packets(1, start=n))
    subscription.end()

    data = [chunk async for chunk in drain(subscription)]

    assert data == [packets(1, start=2), packets(1, start=3), packets(1, start=4)]
    assert subscription.dropped_bytes == 2 * TS_PACKET


async def test_a_widened_subscription_holds_a_burst_and_is_never_narrowed():
    subscription = Subscription(limit_bytes=3 * TS_PACKET)
    subscription.widen(5 * TS_PACKET)
    subscription.widen(2 * TS_PACKET)
    for n in range(6):
        subscription.push(packets(1, start=n))
    subscription.end()

    data = [chunk async for chunk in drain(subscription)]

    assert data == [packets(1, start=n) for n in range(1, 6)]
    assert subscription.dropped_bytes == TS_PACKET


async def test_subscription_keeps_one_chunk_even_when_it_is_larger_than_the_limit():
    subscription = Subscription(limit_bytes=TS_PACKET)
    subscription.push(packets(4))

    assert await subscription.next_data() == packets(4)


async def test_subscription_waits_for_data_then_reports_its_end():
    subscription = Subscription(limit_bytes=10 * TS_PACKET)

    waiting = asyncio.ensure_future(subscription.next_data())
    await asyncio.sleep(0)
    assert not waiting.done()
    subscription.push(packets(1))
    subscription.end()

    assert await waiting == packets(1)
    assert await subscription.next_data() is None


async def test_a_viewer_whose_socket_was_backed_up_lost_what_its_writer_skipped():
    hub = Hub(connect_timeout=1, stall_timeout=1, viewer_buffer_bytes=10 * TS_PACKET)
    kept_up, backed_up = hub.subscribe(), hub.subscribe()
    since = time.monotonic()
    backed_up.skipped(TS_PACKET, since=since)
    backed_up.skipped(2 * TS_PACKET, since=since)
    while_backed_up = hub.viewer_drops()
    backed_up.drained()

    # lost once it reads again: until then it may be a client that reads nothing
    assert while_backed_up == {id(kept_up): 0, id(backed_up): 0}
    assert hub.viewer_drops() == {id(kept_up): 0, id(backed_up): 3 * TS_PACKET}


async def test_a_viewer_that_reads_nothing_is_left_out_of_the_losses():
    hub = Hub(connect_timeout=1, stall_timeout=1, viewer_buffer_bytes=10 * TS_PACKET)
    reading, stalled = hub.subscribe(), hub.subscribe()
    stalled.skipped(TS_PACKET, since=time.monotonic() - NOT_READING_SEC)

    assert (hub.viewers, hub.viewer_drops()) == (2, {id(reading): 0})


async def test_shedding_ends_the_streams_of_the_newest_viewers():
    hub = Hub(connect_timeout=1, stall_timeout=1, viewer_buffer_bytes=10 * TS_PACKET)
    oldest, middle, newest = hub.subscribe(), hub.subscribe(), hub.subscribe()

    hub.shed(2)
    hub._push(packets(1))

    assert hub.viewers == 1
    assert [await middle.next_data(), await newest.next_data()] == [None, None]
    assert (oldest.ended, await oldest.next_data()) == (False, packets(1))
