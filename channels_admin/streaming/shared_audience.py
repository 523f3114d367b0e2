"""The viewers of each private viewer link across every server process, in Redis, so that a
link's cap holds for the whole server and its status counts every process's viewers
(``link_audience.py`` says what is counted).

Keys, under the relay's prefix, per link ``L``:

- ``<prefix>:link:L:seats:<identity>``: the ``/ts`` seats this process holds, with the expiry
  of the relay's viewer counts (``CHANNELS_RELAY_LOCK_SEC``), rewritten by the process at a
  third of it; a dead process's seats run out with it;
- ``<prefix>:link:L:seats``: the set of the processes that hold seats (a process whose count
  ran out is taken out by the next script that reads it);
- ``<prefix>:link:L:hls``: a sorted set of HLS client addresses, scored by the time (Redis's
  clock: one for every process) of each one's latest playlist, trimmed to the window and to
  :data:`~channels_admin.streaming.link_audience.HLS_CLIENTS_PER_LINK` on every write, and
  expiring a window after the latest.

A seat is taken and an HLS client counted by one Lua script each (``register_script``): it
sums the live processes' seats and the HLS clients of the window, and counts the newcomer only
under the cap, so that two processes admitting at the same moment cannot both take the last
place. Scripts name keys built from the holders they read, which a Redis Cluster would refuse:
one Redis server (or a primary) is what the relay supports.

Each process's own seats are written under one lock, with the count it knows: a seat given
back, and each renewal, writes that count, so a command lost to a Redis error is corrected by
the next renewal. What Redis refuses or fails to do is raised as :class:`RelayError`.

Each command fails within the expiry where Redis does not answer. After a failure, Redis is not
asked again for a join (a seat, an HLS client) for that long: the joins meanwhile, those queued
behind the lock too, fail at once, so a crowd arriving while Redis hangs waits one expiry, not
one each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable

import redis.asyncio as redis

from channels_admin.streaming.link_audience import HLS_CLIENTS_PER_LINK
from channels_admin.streaming.relay import RENEW_SHARE, RelayError
from core.cancellation import task_cancel

logger = logging.getLogger(__name__)

# Shared by the scripts: the seats of the live processes (KEYS[1] is the set of holders), and
# the time on Redis's clock, in milliseconds.
_LIB = """
local function seats(holders)
  local total = 0
  for _, holder in ipairs(redis.call('smembers', holders)) do
    local n = redis.call('get', holders .. ':' .. holder)
    if n then total = total + tonumber(n) else redis.call('srem', holders, holder) end
  end
  return total
end
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""
# KEYS: holders, this process's seats, HLS clients. ARGV: identity, cap (-1: none), expiry ms,
# window ms. 1: a seat taken; 0: the link is full.
_TAKE = (
    _LIB
    + """
local cap = tonumber(ARGV[2])
if cap >= 0 then
  local since = now_ms() - tonumber(ARGV[4])
  local hls = redis.call('zcount', KEYS[3], '(' .. since, '+inf')
  if seats(KEYS[1]) + hls >= cap then return 0 end
end
redis.call('incr', KEYS[2])
redis.call('pexpire', KEYS[2], ARGV[3])
redis.call('sadd', KEYS[1], ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[3])
return 1
"""
)
# KEYS: holders, HLS clients. ARGV: client, cap (-1: none), window ms, clients kept.
# 1: counted (again); 0: the link is full.
_HLS = (
    _LIB
    + """
local now = now_ms()
local window = tonumber(ARGV[3])
redis.call('zremrangebyscore', KEYS[2], '-inf', now - window)
if not redis.call('zscore', KEYS[2], ARGV[1]) then
  local cap = tonumber(ARGV[2])
  if cap >= 0 and seats(KEYS[1]) + redis.call('zcard', KEYS[2]) >= cap then return 0 end
end
redis.call('zadd', KEYS[2], now, ARGV[1])
local extra = redis.call('zcard', KEYS[2]) - tonumber(ARGV[4])
if extra > 0 then redis.call('zremrangebyrank', KEYS[2], 0, extra - 1) end
redis.call('pexpire', KEYS[2], window)
return 1
"""
)
# KEYS: holders, this process's seats. ARGV: identity, count, expiry ms.
_WRITE = """
if tonumber(ARGV[2]) > 0 then
  redis.call('set', KEYS[2], ARGV[2], 'px', ARGV[3])
  redis.call('sadd', KEYS[1], ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[3])
else
  redis.call('del', KEYS[2])
  redis.call('srem', KEYS[1], ARGV[1])
end
return 1
"""
# KEYS: holders and HLS clients of each link in turn. ARGV: window ms. Seats and HLS clients
# of each link in turn.
_COUNTS = (
    _LIB
    + """
local since = now_ms() - tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS, 2 do
  out[#out + 1] = seats(KEYS[i])
  out[#out + 1] = redis.call('zcount', KEYS[i + 1], '(' .. since, '+inf')
end
return out
"""
)
# Links whose counts one script reads, at most: a status of a thousand links is a few scripts.
COUNTS_BATCH = 100


class SharedAudience:
    """This process's side of the links' audience in Redis (``link_audience.LinkAudience``)."""

    def __init__(self, url: str, *, prefix: str, identity: str, expiry_seconds: float) -> None:
        # each command fails within the expiry where Redis never answers (a viewer waits on it)
        self._redis = client = redis.Redis.from_url(
            url, socket_timeout=expiry_seconds, socket_connect_timeout=expiry_seconds
        )
        self._prefix = prefix
        self._identity = identity
        self._expiry_ms = int(expiry_seconds * 1000)
        self._take = client.register_script(_TAKE)
        self._hls = client.register_script(_HLS)
        self._write = client.register_script(_WRITE)
        self._counts = client.register_script(_COUNTS)
        # this process's seats per link, as Redis should have them; written under the lock
        self._held: dict[int, int] = {}
        self._unsure: set[int] = set()  # links whose count a failed command may have left wrong
        self._lock = asyncio.Lock()
        self._renewer: asyncio.Task[None] | None = None
        self._failed_at: float | None = None  # the last command Redis failed (time.monotonic())

    async def seat_take(self, link: int, *, cap: int | None, window: float) -> bool:
        holders, own = self._holders(link), self._own(link)
        args = [self._identity, -1 if cap is None else cap, self._expiry_ms, int(window * 1000)]
        async with self._lock:
            self._failing_check()
            try:
                taken = await self._take(keys=[holders, own, self._hls_key(link)], args=args)
            except redis.RedisError as error:
                self._unsure.add(link)
                raise self._failed(error) from error
            self._failed_at = None
            if taken:
                self._held[link] = self._held.get(link, 0) + 1
        if self._renewer is None:
            self._renewer = asyncio.create_task(self._renew())
        return bool(taken)

    async def seat_give(self, link: int) -> None:
        async with self._lock:
            left = self._held.get(link, 0) - 1
            self._held[link] = max(left, 0)
            try:
                await self._write_held(link)
            except redis.RedisError as error:
                self._unsure.add(link)  # the renewal writes it again
                logger.warning("link seats: could not give one back: %s", error)

    async def hls_admit(self, link: int, client: str, *, cap: int | None, window: float) -> bool:
        window_ms = max(int(window * 1000), 1)
        args = [client, -1 if cap is None else cap, window_ms, HLS_CLIENTS_PER_LINK]
        self._failing_check()
        try:
            admitted = await self._hls(keys=[self._holders(link), self._hls_key(link)], args=args)
        except redis.RedisError as error:
            raise self._failed(error) from error
        self._failed_at = None
        return bool(admitted)

    def _failing_check(self) -> None:
        """:class:`RelayError` at once within the expiry of Redis's last failure."""
        if self._failed_at is None:
            return
        ago = time.monotonic() - self._failed_at
        if ago < self._expiry_ms / 1000:
            raise RelayError(
                f"Redis failed {ago:.1f} s ago; asked again after {self._expiry_ms} ms"
            )

    def _failed(self, error: redis.RedisError) -> RelayError:
        self._failed_at = time.monotonic()
        return RelayError(str(error))

    async def counts(self, links: Iterable[int], *, window: float) -> dict[int, tuple[int, int]]:
        links = list(links)
        counted: dict[int, tuple[int, int]] = {}
        try:
            for start in range(0, len(links), COUNTS_BATCH):
                batch = links[start : start + COUNTS_BATCH]
                keys = [key for link in batch for key in (self._holders(link), self._hls_key(link))]
                flat = await self._counts(keys=keys, args=[int(window * 1000)])
                for index, link in enumerate(batch):
                    counted[link] = (int(flat[2 * index]), int(flat[2 * index + 1]))
        except redis.RedisError as error:
            raise RelayError(str(error)) from error
        return counted

    async def close(self) -> None:
        renewer, self._renewer = self._renewer, None
        await task_cancel(renewer)
        async with self._lock:
            for link in self._held:
                self._held[link] = 0
            with contextlib.suppress(redis.RedisError):
                await self._write_all()
            self._held.clear()
        await self._redis.aclose()

    async def _renew(self) -> None:
        """Write this process's seats at a third of their expiry, for as long as it runs."""
        while True:
            await asyncio.sleep(self._expiry_ms / 1000 / RENEW_SHARE)
            async with self._lock:
                try:
                    await self._write_all()
                except redis.RedisError as error:
                    logger.warning("link seats: could not renew them: %s", error)

    async def _write_all(self) -> None:
        """Write every count this process knows, and forget the links it holds no seat of."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for link in set(self._held) | self._unsure:
                await self._write_held(link, client=pipe)
            await pipe.execute()
        self._unsure.clear()
        for link in [link for link, held in self._held.items() if not held]:
            del self._held[link]

    async def _write_held(self, link: int, client: redis.Redis | None = None) -> None:
        await self._write(
            keys=[self._holders(link), self._own(link)],
            args=[self._identity, self._held.get(link, 0), self._expiry_ms],
            client=client,
        )

    def _holders(self, link: int) -> str:
        return f"{self._prefix}:link:{link}:seats"

    def _own(self, link: int) -> str:
        return f"{self._holders(link)}:{self._identity}"

    def _hls_key(self, link: int) -> str:
        return f"{self._prefix}:link:{link}:hls"
