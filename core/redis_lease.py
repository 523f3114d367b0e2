"""A lease in Redis: one process of several holds a key for a while, renewing it, so that it
alone does a job (the channel schedule's runner; the channel relay's ownership of the
upstream, ``channels_admin/streaming/relay.py``); when it dies its key runs out and another
takes it.

``SET NX`` with an expiry, renewed by its holder (a third of the expiry is the usual period),
and renewed or given back only by the holder, both atomic on the server (the scripts below:
the one place they are written).
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid

import redis.asyncio as redis

# Keep the key only if it is still ours; both are atomic on the server.
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


def process_identity() -> str:
    """A name for this process among the others: host, pid and a random part (a pid comes back
    after a restart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RedisLease:
    """The key ``key``, held ``seconds`` past each :meth:`hold` under ``identity``, through
    ``client`` (whose errors, ``redis.RedisError``, the caller deals with)."""

    def __init__(
        self, client: redis.Redis, *, key: str, seconds: float, identity: str | None = None
    ) -> None:
        self._redis = client
        self._key = key
        self._ms = int(seconds * 1000)
        self.identity = identity or process_identity()
        self._own_client = False

    @classmethod
    def at(cls, url: str, *, key: str, seconds: float) -> RedisLease:
        """A lease with a client of its own at ``url``, which :meth:`close` closes."""
        client = redis.Redis.from_url(url, socket_timeout=seconds, socket_connect_timeout=seconds)
        lease = cls(client, key=key, seconds=seconds)
        lease._own_client = True
        return lease

    @property
    def renew_seconds(self) -> float:
        """How often the holder renews: a third of the expiry."""
        return self._ms / 3000

    async def hold(self) -> bool:
        """Whether this process holds the lease now: it renewed it or took it. Raises
        ``redis.RedisError`` when Redis cannot say (the caller then holds nothing)."""
        if await self._redis.eval(_RENEW, 1, self._key, self.identity, self._ms):
            return True
        return bool(await self._redis.set(self._key, self.identity, nx=True, px=self._ms))

    async def holder(self) -> str | None:
        """Who holds the lease now (None: nobody)."""
        value = await self._redis.get(self._key)
        return value.decode() if value is not None else None

    async def release(self) -> None:
        """Give the lease back if held, so another process takes it at its next look."""
        with contextlib.suppress(redis.RedisError):
            await self._redis.eval(_RELEASE, 1, self._key, self.identity)

    async def close(self) -> None:
        """Give the lease back, and close the client if it is the lease's own."""
        await self.release()
        if self._own_client:
            await self._redis.aclose()
