"""What a Redis that is away costs the server: none configured, one down (nothing listens on its
port), and one hung (it takes connections and reads commands, never answering).

    .venv/bin/python benchmarks/redis_away.py [--requests 20]

For each, the real server starts on a throwaway VAR_DIR with that ``REDIS_URL``; prints how long
its start took (its migration and default video included, as ``make run`` does them), then the
latency of ``--requests`` GraphQL queries one after another (each passes the rate limit's
cache): the first, and the median and the slowest of the others, and the log lines that say
what was lost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.local_server import served  # noqa: E402
from loopback_fakes.hung_server import HungServer  # noqa: E402

QUERY = {"query": "{ videos { edges { node { id } } } }"}
LOST = ("could not announce", "not counted")


def measure(redis_url: str | None, count: int) -> None:
    env = {} if redis_url is None else {"REDIS_URL": redis_url}
    started = time.monotonic()
    with served(**env) as server:
        start = time.monotonic() - started
        took = []
        for _ in range(count):
            began = time.monotonic()
            answer = requests.post(f"{server.base_url}/graphql", json=QUERY, timeout=60)
            took.append(time.monotonic() - began)
            answer.raise_for_status()
        log = (server.var_dir / "daphne.log").read_text().splitlines()
    rest = took[1:]
    print(
        f"  start {start:.2f} s; GraphQL: first {took[0] * 1000:.0f} ms, "
        f"then median {statistics.median(rest) * 1000:.1f} ms, slowest {max(rest) * 1000:.1f} ms"
    )
    for line in log:
        if any(text in line for text in LOST):
            print("   ", line.split(" ", 2)[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    print("no Redis (in-memory layer and cache):")
    measure(None, args.requests)
    print("Redis down (nothing listens on its port):")
    measure("redis://127.0.0.1:9/0", args.requests)
    with HungServer() as hung:
        print("Redis hung (takes connections, never answers):")
        measure(hung.url, args.requests)


if __name__ == "__main__":
    main()
