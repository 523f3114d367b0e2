"""Which Redis transport carries the hub's chunks from the owning process to the others?

    .venv/bin/python benchmarks/relay_transports.py [--rates 40,160,400] [--followers 3]
        [--seconds 8] [--transports pubsub,layer,layer-pubsub,stream]

Needs Redis (``REDIS_URL``, by default ``redis://127.0.0.1:6379/0``). One publisher (the owner)
sends chunks as the hub does (64 KiB, or 100 ms of stream at low rates) at each rate in Mbit/s;
``--followers`` processes (the other server processes) receive them. Transports:

- ``pubsub``: what the project ships, :class:`channels_admin.relay.Relay` (Redis PUBLISH and
  SUBSCRIBE);
- ``layer``: a Channels group on the project's channel layer (channels-redis'
  ``RedisChannelLayer``, as ``REDIS_URL`` configures it), one channel per follower;
- ``layer-pubsub``: the same group on channels-redis' ``RedisPubSubChannelLayer``;
- ``stream``: a Redis stream (XADD capped at 1,000 entries, followers blocking in XREAD).

Prints, per transport and rate, the share of the published bytes the slowest follower received,
the chunks it lost, the delay from publishing to receiving (median and 99th percentile over all
followers), and the CPU of the publisher, of the followers (the busiest) and of Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from channels_admin.relay import Relay  # noqa: E402
from config.env import channel_layers_config  # noqa: E402

CHUNK_BYTES = 64 * 1024  # the hub's largest chunk
CHUNK_SECONDS = 0.1  # ... or what 100 ms of stream brings, whichever is smaller
HEADER = 16  # sequence number and the time it was published (ns), before the payload
STREAM_CAP = 1000
GENERATION = "bench"
IDLE_END_SEC = 2.0  # a follower stops when nothing came for this long after the first chunk
FULL_SHARE = 0.99


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def layer_for(transport: str, redis_url: str):
    from channels_redis.core import RedisChannelLayer
    from channels_redis.pubsub import RedisPubSubChannelLayer

    if transport == "layer":
        config = channel_layers_config(redis_url)["default"]["CONFIG"]
        return RedisChannelLayer(**config)
    return RedisPubSubChannelLayer(hosts=[redis_url])


class Publisher:
    def __init__(self, transport: str, redis_url: str, name: str) -> None:
        self.transport = transport
        self.name = name
        if transport == "pubsub":
            self.relay = Relay(redis_url, prefix=name, lock_seconds=60)
        elif transport == "stream":
            self.redis = redis.asyncio.Redis.from_url(redis_url)
        else:
            self.layer = layer_for(transport, redis_url)

    async def send(self, data: bytes) -> None:
        if self.transport == "pubsub":
            await self.relay.publish(GENERATION, data)
        elif self.transport == "stream":
            await self.redis.xadd(self.name, {b"d": data}, maxlen=STREAM_CAP, approximate=True)
        else:
            await self.layer.group_send(self.name, {"type": "ts.chunk", "data": data})

    async def close(self) -> None:
        if self.transport == "pubsub":
            await self.relay.close()
        elif self.transport == "stream":
            await self.redis.delete(self.name)
            await self.redis.aclose()
        elif self.transport == "layer":
            await self.layer.flush()


def ready() -> None:
    print("ready", flush=True)


async def chunks_received(transport: str, redis_url: str, name: str):
    """The chunks as they arrive; says :func:`ready` once the follower listens."""
    if transport == "pubsub":
        relay = Relay(redis_url, prefix=name, lock_seconds=60)
        # Relay.follow ends when no process owns the upstream: measure() has set an owner.
        chunks = relay.follow(GENERATION)
        first = asyncio.ensure_future(anext(chunks))
        await asyncio.sleep(0.5)  # subscribed by then
        ready()
        yield await first
        async for data in chunks:
            yield data
    elif transport == "stream":
        client = redis.asyncio.Redis.from_url(redis_url)
        last = "0-0"  # the stream is new: from its start
        ready()
        while True:
            entries = await client.xread({name: last}, block=1000, count=100)
            for _, items in entries:
                for entry_id, fields in items:
                    last = entry_id
                    yield fields[b"d"]
    else:
        layer = layer_for(transport, redis_url)
        channel = await layer.new_channel()
        await layer.group_add(name, channel)
        ready()
        while True:
            yield (await layer.receive(channel))["data"]


async def follow(args: argparse.Namespace) -> None:
    received, lost, delays, last = 0, 0, [], -1
    chunks = chunks_received(args.transport, args.redis_url, args.name)
    start = cpu_seconds()
    while True:
        try:
            data = await asyncio.wait_for(anext(chunks), IDLE_END_SEC if last >= 0 else 60)
        except (TimeoutError, StopAsyncIteration):
            break
        sequence = int.from_bytes(data[:8], "big")
        delays.append((time.time_ns() - int.from_bytes(data[8:16], "big")) / 1e6)
        lost += sequence - last - 1
        last = sequence
        received += len(data)
    result = {
        "bytes": received,
        "lost": lost,
        "delays_ms": delays,
        "cpu": cpu_seconds() - start,
    }
    print(json.dumps(result), flush=True)


async def publish(publisher: Publisher, rate_bps: float, seconds: float) -> tuple[int, float]:
    """Send for ``seconds`` at ``rate_bps``; the bytes sent and the publisher's CPU seconds."""
    size = int(min(CHUNK_BYTES, rate_bps / 8 * CHUNK_SECONDS))
    interval = size * 8 / rate_bps
    payload = bytes(size - HEADER)
    start_cpu, start = cpu_seconds(), time.monotonic()
    sent, sequence = 0, 0
    while time.monotonic() - start < seconds:
        header = sequence.to_bytes(8, "big") + time.time_ns().to_bytes(8, "big")
        await publisher.send(header + payload)
        sent += size
        sequence += 1
        delay = start + sequence * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
    return sent, cpu_seconds() - start_cpu


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def measure(transport: str, rate_mbps: float, args: argparse.Namespace) -> str:
    name = f"bench-transport-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(args.redis_url)
    client.set(f"{name}:owner", "the benchmark", px=int((args.seconds + 60) * 1000))
    command = [sys.executable, __file__, "--follow", transport, "--name", name]
    command += ["--redis-url", args.redis_url]
    followers = [
        subprocess.Popen(  # noqa: S603 (our own interpreter and script)
            command, cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(args.followers)
    ]
    for follower in followers:
        if follower.stdout.readline().strip() != "ready":
            raise SystemExit(f"a {transport} follower did not start")
    redis_before = redis_cpu(client)

    async def run() -> tuple[int, float]:
        publisher = Publisher(transport, args.redis_url, name)
        try:
            return await publish(publisher, rate_mbps * 1e6, args.seconds)
        finally:
            await publisher.close()

    sent, publisher_cpu = asyncio.run(run())
    results = [
        json.loads(follower.communicate(timeout=args.seconds + 120)[0]) for follower in followers
    ]
    redis_cores = (redis_cpu(client) - redis_before) / args.seconds
    client.delete(f"{name}:owner")
    client.close()
    slowest = min(result["bytes"] for result in results) / sent
    delays = sorted(d for result in results for d in result["delays_ms"])
    p99 = delays[int(len(delays) * 0.99)] if delays else float("nan")
    return (
        f"  {transport:12} {rate_mbps:5g} Mbit/s: slowest follower {slowest:6.1%} "
        f"({max(r['lost'] for r in results)} chunks lost), delay median "
        f"{statistics.median(delays) if delays else float('nan'):6.1f} ms, p99 {p99:7.1f} ms; "
        f"CPU publisher {publisher_cpu / args.seconds:4.2f}, follower "
        f"{max(r['cpu'] for r in results) / args.seconds:4.2f}, Redis {redis_cores:4.2f} cores"
        + ("" if slowest >= FULL_SHARE else "  <- NOT full rate")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=lambda s: [float(n) for n in s.split(",")], default="40")
    parser.add_argument("--followers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument(
        "--transports",
        type=lambda s: s.split(","),
        default="pubsub,layer,layer-pubsub,stream",
    )
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    # a follower process (started by the benchmark itself)
    parser.add_argument("--follow", dest="transport")
    parser.add_argument("--name")
    args = parser.parse_args()
    if args.transport:
        asyncio.run(follow(args))
        return
    print(
        f"{args.followers} followers, Redis at {args.redis_url}; "
        f"full rate = slowest follower >= {FULL_SHARE:.0%}",
        flush=True,
    )
    for rate in args.rates:
        for transport in args.transports:
            print(measure(transport, rate, args), flush=True)


if __name__ == "__main__":
    main()
