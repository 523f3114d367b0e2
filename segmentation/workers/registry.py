"""Which inference workers are alive, and how busy: one Redis key per worker, rewritten by its
heartbeat with an expiry, so a worker that dies or stops renewing drops out by itself."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import asdict, dataclass, replace

import redis.asyncio as redis

NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


@dataclass(frozen=True)
class WorkerInfo:
    id: str  # one run of a worker process: its name and a random suffix
    name: str
    channel: str  # the channel layer's channel it takes requests on
    engine: str
    device: str
    capacity: int  # its MAX_SESSIONS
    load: int = 0  # sessions open
    draining: bool = False  # stopping: takes no new sessions
    operations: int = 0  # operations answered since it started

    @property
    def free(self) -> int:
        return 0 if self.draining else max(0, self.capacity - self.load)

    def with_load(self, load: int, operations: int, *, draining: bool) -> WorkerInfo:
        return replace(self, load=load, operations=operations, draining=draining)


def worker_info_new(*, name: str, engine: str, device: str, capacity: int) -> WorkerInfo:
    if not NAME.match(name):
        raise ValueError(f"a worker's name is 1-40 letters, digits, '-' or '_', not {name!r}")
    worker_id = f"{name}-{uuid.uuid4().hex[:8]}"
    return WorkerInfo(worker_id, name, worker_channel(worker_id), engine, device, capacity)


def worker_channel(worker_id: str) -> str:
    """The channel a worker takes its requests on."""
    return f"segmentation.worker.{worker_id}"


class WorkerRegistry:
    def __init__(self, client: redis.Redis, *, prefix: str, ttl_seconds: float) -> None:
        self._redis = client
        self._prefix = f"{prefix}:worker:"
        self._ttl_ms = int(ttl_seconds * 1000)

    @classmethod
    def at_url(cls, url: str, *, prefix: str, ttl_seconds: float) -> WorkerRegistry:
        """The registry in the Redis at ``url``, whose every command gives up after
        ``ttl_seconds`` (``redis.TimeoutError``): a Redis that takes connections and never
        answers fails a caller as one that is down does, instead of holding it for good."""
        client = redis.Redis.from_url(
            url, socket_timeout=ttl_seconds, socket_connect_timeout=ttl_seconds
        )
        return cls(client, prefix=prefix, ttl_seconds=ttl_seconds)

    async def announce(self, info: WorkerInfo) -> None:
        """Register or renew ``info`` for one more expiry period."""
        await self._redis.set(self._prefix + info.id, json.dumps(asdict(info)), px=self._ttl_ms)

    async def withdraw(self, worker_id: str) -> None:
        await self._redis.delete(self._prefix + worker_id)

    async def get(self, worker_id: str) -> WorkerInfo | None:
        return _parse(await self._redis.get(self._prefix + worker_id))

    async def workers(self) -> list[WorkerInfo]:
        """Every live worker, by ID."""
        keys = [key async for key in self._redis.scan_iter(match=self._prefix + "*", count=100)]
        values = await self._redis.mget(keys) if keys else []
        return sorted(
            (info for info in map(_parse, values) if info is not None), key=lambda w: w.id
        )


def _parse(value: bytes | None) -> WorkerInfo | None:
    """The worker a registry value describes (None if it expired meanwhile)."""
    return None if value is None else WorkerInfo(**json.loads(value))
