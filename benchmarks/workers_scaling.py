"""Click throughput with many sessions at once on one inference worker against two (issue 18).

    .venv/bin/python benchmarks/workers_scaling.py [--sessions 8] [--seconds 20]

For 1 and then 2 workers (``manage.py segmentation_worker``, the classic engine on the CPU)
behind one web process, ``--sessions`` clients each open a session on the default video
(854 x 480) and click it over and over (each click a first cut, alternating between two
points) for ``--seconds``. Prints the clicks answered per second, their median round trip, and
the CPU each process used: the web process's share shows whether routing is what limits it.
Needs Redis (``REDIS_URL``, default this machine's).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from benchmarks.api_overhead import ADD, POINTS  # noqa: E402
from benchmarks.fanout import cpu_seconds  # noqa: E402
from benchmarks.local_server import served  # noqa: E402

START = "mutation($input: StartSessionInput!) { startSession(input: $input) { sessionId } }"


def client(base: str, ready: threading.Barrier, window: list[float], round_trips: list[float]):
    """Open a session, wait for the others, then click until ``window[0]``."""
    http = requests.Session()
    answer = http.post(
        f"{base}/graphql",
        json={"query": START, "variables": {"input": {"path": "gallery/default.mp4"}}},
        timeout=60,
    ).json()
    session_id = answer["data"]["startSession"]["sessionId"]
    ready.wait()
    n = 0
    while time.monotonic() < window[0]:
        started = time.perf_counter()
        click = {
            "sessionId": session_id,
            "frameIndex": 0,
            "objectId": 1,
            "clearOldPoints": True,
            "labels": [1],
            "points": [POINTS[n % 2]],
        }
        response = http.post(
            f"{base}/graphql", json={"query": ADD, "variables": {"input": click}}, timeout=120
        )
        if "errors" in response.json():
            raise SystemExit(f"addPoints failed: {response.text}")
        round_trips.append(time.perf_counter() - started)
        n += 1


def run(workers: int, sessions: int, seconds: float) -> float:
    with served(workers=workers) as server:
        pids = {"web": server.pid} | {f"worker {n}": p for n, p in enumerate(server.worker_pids)}
        round_trips: list[float] = []
        window, before = [0.0], {}

        def begin() -> None:  # once every session is open, before any client goes on
            before.update({name: cpu_seconds(pid) for name, pid in pids.items()})
            window[0] = time.monotonic() + seconds

        ready = threading.Barrier(sessions + 1, action=begin)
        threads = [
            threading.Thread(target=client, args=(server.base_url, ready, window, round_trips))
            for _ in range(sessions)
        ]
        for thread in threads:
            thread.start()
        ready.wait()
        started = window[0] - seconds
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        cpu = {name: (cpu_seconds(pid) - before[name]) / elapsed for name, pid in pids.items()}
    rate = len(round_trips) / elapsed
    shares = ", ".join(f"{name} {cores:.2f}" for name, cores in cpu.items())
    print(
        f"{workers} worker(s), {sessions} sessions: {rate:.2f} clicks/s, median round trip "
        f"{statistics.median(round_trips) * 1000:.0f} ms; CPU in cores: {shares}",
        flush=True,
    )
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    one = run(1, args.sessions, args.seconds)
    two = run(2, args.sessions, args.seconds)
    print(f"two workers against one: {two / one:.2f}x the clicks per second")


if __name__ == "__main__":
    main()
