"""Which Redis transport carries the hub's chunks from the owning process to the others?

    .venv/bin/python benchmarks/relay_transports.py [--rates 40,100,160] [--followers 3]
        [--seconds 8] [--runs 3] [--transports stream,pubsub,layer,layer-pubsub]

Needs Redis (``REDIS_URL``, by default ``redis://127.0.0.1:6379/0``). One publisher (the owner)
sends chunks as the hub does (64 KiB, or 100 ms of stream at low rates) at each rate in Mbit/s;
``--followers`` processes (the other server processes) receive them. Transports:

- ``stream``: what the project ships, :class:`channels_admin.streaming.relay.Relay` (a Redis stream
  capped at ``BACKLOG_CHUNKS`` entries, followers blocking in XREAD);
- ``pubsub``: Redis PUBLISH and SUBSCRIBE (what the relay first used);
- ``layer``: a Channels group on the project's channel layer (channels-redis'
  ``RedisChannelLayer``, as ``REDIS_URL`` configures it), one channel per follower;
- ``layer-pubsub``: the same group on channels-redis' ``RedisPubSubChannelLayer``.

Prints, per transport and rate, medians over ``--runs`` runs of: the share of the published bytes
the slowest follower received, the chunks it lost, the followers Redis disconnected, the delay
from publishing to receiving (median and 99th percentile over all followers), and the CPU of the
publisher, of the busiest follower and of Redis.
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

from channels_admin.streaming.relay import Relay  # noqa: E402
from config.env import channel_layers_config  # noqa: E402

CHUNK_BYTES = 64 * 1024  # the hub's largest chunk
CHUNK_SECONDS = 0.1  # ... or what 100 ms of stream brings, whichever is smaller
HEADER = 16  # sequence number and the time it was published (ns), before the payload
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
        if transport == "stream":
            self.relay = Relay(redis_url, prefix=name, lock_seconds=60)
        elif transport == "pubsub":
            self.redis = redis.asyncio.Redis.from_url(redis_url)
        else:
            self.layer = layer_for(transport, redis_url)

    async def send(self, data: bytes) -> None:
        if self.transport == "stream":
            await self.relay.publish(GENERATION, data)
        elif self.transport == "pubsub":
            await self.redis.publish(self.name, data)
        else:
            await self.layer.group_send(self.name, {"type": "ts.chunk", "data": data})

    async def close(self) -> None:
        if self.transport == "stream":
            await self.relay.close()
        elif self.transport == "pubsub":
            await self.redis.aclose()
        elif self.transport == "layer":
            await self.layer.flush()


def ready() -> None:
    print("ready", flush=True)


async def chunks_received(transport: str, redis_url: str, name: str):
    """The chunks as they arrive; says :func:`ready` once the follower listens."""
    if transport == "stream":
        relay = Relay(redis_url, prefix=name, lock_seconds=60)
        # Relay.follow ends when no process owns the upstream: measure() has set an owner. The
        # stream is new, so the follower reads it from its first entry.
        ready()
        async for data in relay.follow(GENERATION):
            yield data
    elif transport == "pubsub":
        pubsub = redis.asyncio.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe(name)
        ready()
        async for message in pubsub.listen():
            yield message["data"]
    else:
        layer = layer_for(transport, redis_url)
        channel = await layer.new_channel()
        await layer.group_add(name, channel)
        ready()
        while True:
            yield (await layer.receive(channel))["data"]


async def follow(args: argparse.Namespace) -> None:
    received, lost, delays, last, error = 0, 0, [], -1, ""
    chunks = chunks_received(args.transport, args.redis_url, args.name)
    start = cpu_seconds()
    while True:
        try:
            data = await asyncio.wait_for(anext(chunks), IDLE_END_SEC if last >= 0 else 60)
        except (TimeoutError, StopAsyncIteration):
            break
        except redis.RedisError as failure:  # Redis drops a subscriber that falls too far behind
            error = str(failure)
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
        "error": error,
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


def measure(transport: str, rate_mbps: float, args: argparse.Namespace) -> dict[str, float]:
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
    client.delete(f"{name}:owner", f"{name}:ts")
    client.close()
    delays = sorted(d for result in results for d in result["delays_ms"]) or [float("nan")]
    return {
        "share": min(result["bytes"] for result in results) / sent,
        "lost": max(result["lost"] for result in results),
        "dropped": sum(bool(result["error"]) for result in results),
        "median_ms": statistics.median(delays),
        "p99_ms": delays[int(len(delays) * 0.99)],
        "publisher": publisher_cpu / args.seconds,
        "follower": max(result["cpu"] for result in results) / args.seconds,
        "redis": redis_cores,
    }


def summary(transport: str, rate_mbps: float, runs: list[dict[str, float]]) -> str:
    """Medians over the runs (the slowest follower's share in every run in brackets)."""

    def median(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    shares = ", ".join(f"{run['share']:.1%}" for run in runs)
    dropped = sum(run["dropped"] for run in runs)
    return (
        f"  {transport:12} {rate_mbps:5g} Mbit/s: slowest follower {median('share'):6.1%} "
        f"({shares}); chunks lost {median('lost'):g}"
        + (f", {dropped} follower(s) disconnected by Redis" if dropped else "")
        + f"; delay median {median('median_ms'):.1f} ms, p99 {median('p99_ms'):.1f} ms; "
        f"CPU publisher {median('publisher'):.2f}, busiest follower {median('follower'):.2f}, "
        f"Redis {median('redis'):.2f} cores"
        + ("" if median("share") >= FULL_SHARE else "  <- NOT full rate")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rates", type=lambda s: [float(n) for n in s.split(",")], default="40,100,160"
    )
    parser.add_argument("--followers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--transports",
        type=lambda s: s.split(","),
        default="stream,pubsub,layer,layer-pubsub",
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
            runs = [measure(transport, rate, args) for _ in range(args.runs)]
            print(summary(transport, rate, runs), flush=True)


if __name__ == "__main__":
    main()
