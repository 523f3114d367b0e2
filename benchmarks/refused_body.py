"""What a body refused at its head (413 from its ``Content-Length``) costs the server: it is still
read and dropped until the client has sent it, so that the client reads the answer rather than a
reset (``edge/server.py``, ``REFUSED_READ_BYTES``), all of them together at most
``SERVER_REFUSED_DRAIN_MB`` a second (``edge/body_limit.py``).

    .venv/bin/python benchmarks/refused_body.py [--posts 20] [--mb 70]

Posts ``--mb`` MB of ``{}`` to ``/annotations/coco.json`` (capped at ``MAX_ANNOTATIONS_MB``)
``--posts`` times, one after the other, and prints the server's CPU per refused post, less its
idle rate over the same time (measured over ``IDLE_SEC`` first).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fanout import cpu_seconds
from benchmarks.local_server import served

IDLE_SEC = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posts", type=int, default=20)
    parser.add_argument("--mb", type=int, default=70)
    options = parser.parse_args()
    junk = b"{}" + b" " * (options.mb * 2**20 - 2)
    with served() as server, requests.Session() as http:
        time.sleep(2)  # started
        idle_from = cpu_seconds(server.pid)
        time.sleep(IDLE_SEC)
        idle_rate = (cpu_seconds(server.pid) - idle_from) / IDLE_SEC
        before, began = cpu_seconds(server.pid), time.monotonic()
        statuses = set()
        for _ in range(options.posts):
            answer = http.post(
                f"{server.base_url}/annotations/coco.json",
                data=junk,
                headers={"Content-Type": "application/json"},
                timeout=60,
            )
            statuses.add(answer.status_code)
        took = time.monotonic() - began
        cpu = (cpu_seconds(server.pid) - before - idle_rate * took) / options.posts
        wall = took / options.posts
    print(
        f"answers {sorted(statuses)}; per post of {options.mb} MB: server CPU "
        f"{cpu * 1000:.1f} ms, round trip {wall * 1000:.0f} ms (the server idle: "
        f"{idle_rate:.3f} cores, taken off)"
    )


if __name__ == "__main__":
    main()
