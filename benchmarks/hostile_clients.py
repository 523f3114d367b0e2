"""A person's click while hostile clients push the engine (issue 36, finding 2).

    .venv/bin/python benchmarks/hostile_clients.py [--hostile 8] [--clicks 30] [--seconds 30]

Runs the real server (classic engine, default settings) on the drawn default video. One
person's session clicks on frame 0, alternating two points, one click at a time with a pause
of 0.2 s between clicks: first alone, then while ``--hostile`` clients, each with its own
address behind the trusted proxy (``X-Forwarded-For`` over loopback, as nginx sends it) and
its own session, send requests back to back, never waiting for ``Retry-After`` (but the
``within`` clients, which do as the budget says). Two kinds, one after the other:

- ``aliased``: the finding's request, ten aliased ``addPoints`` of 100 random points, each on
  its own frame and object (cost 4130, over ``GRAPHQL_MAX_COST``): how fast each is refused;
- ``within``: the dearest click the cost admits, 21 points on a new frame each time, until the
  session's engine budget answers ``RESOURCE_EXHAUSTED``, then again when it says to.

Prints first the round trip of the aliased request alone, refused for its cost. Then, for each
kind, the person's click round trip (median and 90th percentile) against its
unloaded median, and what the hostile clients were answered (by code, with the median answer
time). The server's CPU time over each phase comes from /proc.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from benchmarks.fanout import cpu_seconds  # noqa: E402
from benchmarks.local_server import served  # noqa: E402
from benchmarks.stats import nearest_rank  # noqa: E402

POINTS = ([0.78, 0.5], [0.3, 0.45])
FRAMES = 144
START = 'mutation { startSession(input: {path: "gallery/default.mp4"}) { sessionId } }'
CLICK = "mutation($input: AddPointsInput!) { addPoints(input: $input) { frameIndex } }"
PAUSE_SEC = 0.2
KINDS = ("aliased", "within")


def start(http: requests.Session, base_url: str) -> str:
    answer = http.post(f"{base_url}/graphql", json={"query": START}, timeout=60).json()
    return answer["data"]["startSession"]["sessionId"]


def click_input(session_id: str, *, frame: int, points: list[list[float]], object_id: int = 1):
    return {
        "sessionId": session_id,
        "frameIndex": frame,
        "objectId": object_id,
        "clearOldPoints": True,
        "labels": [1] * len(points),
        "points": points,
    }


def person(base_url: str, clicks: int) -> list[float]:
    """Round trips of ``clicks`` clicks of one session, one at a time."""
    http = requests.Session()
    session_id = start(http, base_url)
    seconds = []
    for n in range(clicks):
        payload = {
            "query": CLICK,
            "variables": {"input": click_input(session_id, frame=0, points=[POINTS[n % 2]])},
        }
        started = time.perf_counter()
        answer = http.post(f"{base_url}/graphql", json=payload, timeout=120).json()
        seconds.append(time.perf_counter() - started)
        if answer != {"data": {"addPoints": {"frameIndex": 0}}}:
            raise SystemExit(f"the person's click failed: {answer}")
        time.sleep(PAUSE_SEC)
    return seconds


def aliased(session_id: str, spots: random.Random) -> dict:
    declared = ", ".join(f"$i{n}: AddPointsInput!" for n in range(10))
    fields = " ".join(f"c{n}: addPoints(input: $i{n}) {{ frameIndex }}" for n in range(10))
    variables = {
        f"i{n}": click_input(
            session_id,
            frame=n,
            object_id=n + 1,
            points=[[spots.random(), spots.random()] for _ in range(100)],
        )
        for n in range(10)
    }
    return {"query": f"mutation({declared}) {{ {fields} }}", "variables": variables}


def within(session_id: str, spots: random.Random) -> dict:
    points = [[spots.random(), spots.random()] for _ in range(21)]
    frame = spots.randrange(FRAMES)
    return {
        "query": CLICK,
        "variables": {"input": click_input(session_id, frame=frame, points=points)},
    }


def hostile(base_url: str, number: int, kind: str, stop: threading.Event, answers: list) -> None:
    http = requests.Session()
    # an address of each client's own, and other addresses for each kind
    http.headers["X-Forwarded-For"] = f"198.51.{100 + KINDS.index(kind)}.{number + 1}"
    http.headers["Content-Type"] = "application/json"
    session_id = start(http, base_url)
    spots = random.Random(number)
    # the aliased request is the same each time, encoded once: the client's own work is not
    # what is measured (an attacker's machine is elsewhere)
    fixed = json.dumps(aliased(session_id, spots)).encode() if kind == "aliased" else None
    while not stop.is_set():
        body = fixed or json.dumps(within(session_id, spots)).encode()
        started = time.perf_counter()
        response = http.post(f"{base_url}/graphql", data=body, timeout=300)
        took = time.perf_counter() - started
        answer = response.json()
        code = answer["errors"][0]["extensions"]["code"] if "errors" in answer else "ran"
        answers.append((code, took))
        if kind == "within" and code in {"RESOURCE_EXHAUSTED", "RATE_LIMITED"}:
            stop.wait(int(response.headers.get("Retry-After", "1")))


def refusal_alone(base_url: str, count: int) -> list[float]:
    """Round trips of the aliased request on an idle server, each from an address of its own
    (so that each is refused for its cost, not for its client's rate)."""
    http = requests.Session()
    session_id = start(http, base_url)
    body = json.dumps(aliased(session_id, random.Random(0))).encode()
    seconds = []
    for n in range(count):
        headers = {"Content-Type": "application/json", "X-Forwarded-For": f"203.0.113.{n + 1}"}
        started = time.perf_counter()
        answer = http.post(f"{base_url}/graphql", data=body, headers=headers, timeout=60).json()
        seconds.append(time.perf_counter() - started)
        if answer["errors"][0]["extensions"]["code"] != "QUERY_TOO_COMPLEX":
            raise SystemExit(f"the aliased request was not refused for its cost: {answer}")
    return seconds


def phase(base_url: str, pid: int, kind: str, count: int, clicks: int) -> dict:
    stop = threading.Event()
    answers: list[tuple[str, float]] = []
    threads = [
        threading.Thread(target=hostile, args=(base_url, n, kind, stop, answers), daemon=True)
        for n in range(count)
    ]
    cpu = cpu_seconds(pid)
    for thread in threads:
        thread.start()
    time.sleep(2)  # the hostile clients are under way
    seconds = person(base_url, clicks)
    stop.set()
    for thread in threads:
        thread.join(timeout=300)
    return {"clicks": seconds, "answers": answers, "server_cpu": cpu_seconds(pid) - cpu}


def summary(seconds: list[float]) -> str:
    return (
        f"median {statistics.median(seconds) * 1000:.0f} ms, "
        f"p90 {nearest_rank(seconds, 0.9) * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hostile", type=int, default=8)
    parser.add_argument("--clicks", type=int, default=30)
    parser.add_argument("--kinds", default="aliased,within")
    options = parser.parse_args()
    with served() as server:
        person(server.base_url, 3)  # warm up
        refusals = refusal_alone(server.base_url, options.clicks)
        print(f"the aliased request alone, refused: {summary(refusals)}")
        alone = person(server.base_url, options.clicks)
        print(f"the person alone: {summary(alone)}")
        for kind in options.kinds.split(","):
            result = phase(server.base_url, server.pid, kind, options.hostile, options.clicks)
            ratio = statistics.median(result["clicks"]) / statistics.median(alone)
            print(
                f"{kind} x{options.hostile}: person {summary(result['clicks'])} "
                f"({ratio:.2f}x alone); server CPU {result['server_cpu']:.1f} s"
            )
            by_code = collections.defaultdict(list)
            for code, took in result["answers"]:
                by_code[code].append(took)
            for code, took in sorted(by_code.items()):
                median_ms = statistics.median(took) * 1000
                print(f"  hostile answers {code}: {len(took)}, median {median_ms:.0f} ms")


if __name__ == "__main__":
    main()
