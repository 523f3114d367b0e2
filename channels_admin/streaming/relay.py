"""The hub across several server processes, through Redis: still ONE upstream connection.

With ``REDIS_URL`` set, every process has its hub, but only one, the owner, connects to the
upstream. Ownership is a Redis key (``<prefix>:owner``), a lease (``core/redis_lease.py``)
taken with ``SET NX`` and an expiry, renewed by its holder at a third of that expiry; when the
owner dies, its key runs out and the first process to find it free takes over. The owner
appends every chunk it relays to the Redis stream ``<prefix>:ts``; the other processes' hubs
read their chunks from there instead of from an upstream, and hand them to their own viewers.

A stream, not pub/sub (``benchmarks/relay_transports.py`` measured both, and Channels groups):
a follower reads many chunks per round trip, at about half the CPU, and one that falls behind
catches up from the stream's backlog (capped at :data:`BACKLOG_CHUNKS`, the oldest going first,
as in a viewer's buffer) where Redis would disconnect a pub/sub subscriber whose output buffer
overflowed. The stream expires with the owner's key when nobody appends to it.

Chunks carry the generation of the switch they belong to (the time the channel was selected),
so a process never passes bytes of the new stream to viewers of the old one, whichever of the
switch and the first new bytes reaches it first. Switches themselves reach every process on the
pub/sub channel ``<prefix>:switch``.

Every process with viewers reports its count under ``<prefix>:viewers:<identity>``, with the
same expiry as the owner's key and listed in the set ``<prefix>:viewers``, so that any process
can answer how many viewers watch in all; a dead process's count runs out with its key.

What Redis refuses or fails to do reaches the hub as :class:`RelayError`, so the hub deals with
one error of its relay and knows nothing of Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import ParamSpec, TypeVar

import redis.asyncio as redis

from core.cancellation import cancellation_check
from core.redis_lease import RedisLease, process_identity

logger = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

# Renew the owner's key this often, as a share of its expiry.
RENEW_SHARE = 3
# The stream keeps this many chunks (of up to 64 KiB: 8 MiB at most) for followers that
# fall behind; a follower starting on a switch first takes up to CATCH_UP_CHUNKS of them, those of
# its switch, so that it misses none of the new stream's start.
BACKLOG_CHUNKS = 128
CATCH_UP_CHUNKS = 16
# Chunks a follower takes per read, at most.
READ_CHUNKS = 64


class RelayError(Exception):
    """Redis could not be reached, or failed a command; the caller goes on without the relay."""


@contextlib.contextmanager
def _relay_errors() -> Iterator[None]:
    """Redis's errors, raised as :class:`RelayError`."""
    try:
        yield
    except redis.RedisError as error:
        raise RelayError(str(error)) from error


def _raising_relay_error(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with _relay_errors():
            return await method(*args, **kwargs)

    return wrapper


class Relay:
    """One process's side of the relay: ownership, publishing, following, switches."""

    def __init__(self, url: str, *, prefix: str, lock_seconds: float) -> None:
        # A Redis that takes connections and never answers fails each command within the lock's
        # time (a following read blocks a third of it), rather than holding a switch, a viewer
        # or the server's stop for ever.
        self._redis = redis.Redis.from_url(
            url, socket_timeout=lock_seconds, socket_connect_timeout=lock_seconds
        )
        self.identity = process_identity()
        self._ownership = RedisLease(
            self._redis, key=f"{prefix}:owner", seconds=lock_seconds, identity=self.identity
        )
        self._stream = f"{prefix}:ts"
        self._switch_channel = f"{prefix}:switch"
        self._viewers_key = f"{prefix}:viewers"
        self._lock_ms = int(lock_seconds * 1000)
        # The generation and stream entry ID this process last published or followed: where a
        # follower resumes, with nothing repeated, after an error or a lost ownership.
        self._position: tuple[str, bytes] | None = None

    @property
    def renew_seconds(self) -> float:
        return self._lock_ms / 1000 / RENEW_SHARE

    @_raising_relay_error
    async def own(self) -> bool:
        """Whether this process owns the upstream now: it held the key (renewed) or took it."""
        return await self._ownership.hold()

    async def release(self) -> None:
        await self._ownership.release()

    @_raising_relay_error
    async def owner(self) -> str | None:
        return await self._ownership.holder()

    @_raising_relay_error
    async def publish(self, generation: str, data: bytes) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.xadd(
                self._stream,
                {b"g": generation, b"d": data},
                maxlen=BACKLOG_CHUNKS,
                approximate=False,  # one entry out per entry in, at this rate cheap
            )
            pipe.pexpire(self._stream, self._lock_ms)
            entry_id, _ = await pipe.execute()
        self._position = (generation, entry_id)

    async def follow(self, generation: str) -> AsyncIterator[bytes]:
        """The owner's chunks of ``generation``, as they come; ends (so that the caller can try
        to take over) when the owner's key is gone."""
        with _relay_errors():
            if self._position is not None and self._position[0] == generation:
                last = self._position[1]
            else:
                last = await self._catch_up_start(generation)
            block_ms = self._lock_ms // RENEW_SHARE
            while True:
                cancellation_check()
                read = await self._redis.xread(
                    {self._stream: last}, count=READ_CHUNKS, block=block_ms
                )
                if not read:
                    if await self.owner() is None:
                        return
                    continue
                for entry_id, fields in read[0][1]:
                    last = entry_id
                    self._position = (generation, entry_id)
                    if fields[b"g"].decode() == generation:
                        yield fields[b"d"]

    async def _catch_up_start(self, generation: str) -> bytes:
        """Where to start reading: before the latest entries of ``generation`` already in the
        stream (up to CATCH_UP_CHUNKS), else after the latest entry."""
        latest = await self._redis.xrevrange(self._stream, count=CATCH_UP_CHUNKS)
        start = latest[0][0] if latest else b"0-0"
        for entry_id, fields in latest:
            if fields[b"g"].decode() != generation:
                break
            start = _preceding(entry_id)
        return start

    @_raising_relay_error
    async def announce(self, switch: dict) -> None:
        """Tell every process (this one too) that the channel switched."""
        await self._redis.publish(self._switch_channel, json.dumps(switch))

    async def listen(self, on_switch: Callable[[dict], Awaitable[None]]) -> None:
        """Call ``on_switch`` for every switch announced, until cancelled; reconnects."""
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._switch_channel)
                async for message in pubsub.listen():
                    cancellation_check()
                    await on_switch(json.loads(message["data"]))
            except redis.RedisError as error:
                logger.warning("relay: switch feed lost (%s); reconnecting", error)
                await asyncio.sleep(1)
            finally:
                with contextlib.suppress(redis.RedisError):
                    await pubsub.aclose()

    @_raising_relay_error
    async def viewers_report(self, count: int) -> None:
        """Record this process's viewer count until the expiry; call again within it."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.set(self._own_viewers_key, count, px=self._lock_ms)
            pipe.sadd(self._viewers_key, self.identity)
            await pipe.execute()

    @_raising_relay_error
    async def viewers_total(self) -> int:
        """The viewers of every live process, as last reported; forgets the processes whose
        count ran out. (One that reports meanwhile may be forgotten too: its next report, within
        the renewal period, lists it again.)"""
        identities = list(await self._redis.smembers(self._viewers_key))
        if not identities:
            return 0
        counts = await self._redis.mget(
            [f"{self._viewers_key}:{identity.decode()}" for identity in identities]
        )
        reported = dict(zip(identities, counts, strict=True))
        gone = [identity for identity, count in reported.items() if count is None]
        if gone:
            await self._redis.srem(self._viewers_key, *gone)
        return sum(int(count) for count in counts if count is not None)

    @property
    def _own_viewers_key(self) -> str:
        return f"{self._viewers_key}:{self.identity}"

    async def close(self) -> None:
        await self.release()
        with contextlib.suppress(redis.RedisError):
            await self._redis.delete(self._own_viewers_key)
            await self._redis.srem(self._viewers_key, self.identity)
        await self._redis.aclose()


def _preceding(entry_id: bytes) -> bytes:
    """The stream entry ID just before ``entry_id`` (XREAD returns entries after an ID)."""
    milliseconds, sequence = map(int, entry_id.split(b"-"))
    if sequence:
        return b"%d-%d" % (milliseconds, sequence - 1)
    return b"%d-%d" % (milliseconds - 1, 2**64 - 1)
