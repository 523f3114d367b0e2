"""Many segmentation sessions at once against the real server, and its memory before and after.

    .venv/bin/python benchmarks/sessions_load.py [--clients 50] [--rounds 2]

Runs the server (daphne, classic engine) on the drawn default video (854 x 480, 144 frames)
with room for exactly ``--clients`` sessions. Each round, every client at once opens a session,
clicks twice, propagates the whole video, and then, by turns: closes the session after the
stream ends; cancels the propagation after 10 frames; hangs up mid-stream; or leaves its session
open until the idle timeout (``SESSION_IDLE_TIMEOUT_SEC=20``) takes it. Between rounds the
script waits for the idle timeout. Reports clicks' latency under the load, the server's resident
memory idle (after one warm-up session), at its peak, and after every round once the sessions
are gone, and whether every place under the cap is free again (all clients can open sessions).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from benchmarks.local_server import served  # noqa: E402

IDLE_TIMEOUT_SEC = 20
PATH = "gallery/default.mp4"
START = "mutation($p: String!) { startSession(input: {path: $p}) { sessionId } }"
ADD = """mutation($s: String!, $x: Float!) {
  addPoints(input: {sessionId: $s, frameIndex: 0, objectId: 1, clearOldPoints: true,
                    labels: [1], points: [[$x, 0.45]]}) { frameIndex }
}"""
CANCEL = "mutation($s: String!) { cancelPropagateInVideo(input: {sessionId: $s}) { success } }"
CLOSE = "mutation($s: String!) { closeSession(input: {sessionId: $s}) { success } }"
ROLES = ("closes", "cancels", "hangs up", "expires")


def gql(http: requests.Session, base: str, query: str, **variables: object) -> dict:
    payload = {"query": query, "variables": variables}
    answer = http.post(f"{base}/graphql", json=payload, timeout=300)
    body = answer.json()
    if body.get("errors"):
        raise RuntimeError(body["errors"][0]["message"])
    return body["data"]


def visit(base: str, role: str, n: int) -> list[float]:
    """One client's visit; the seconds each of its clicks took."""
    http = requests.Session()
    session_id = gql(http, base, START, p=PATH)["startSession"]["sessionId"]
    clicks = []
    for click in range(2):
        started = time.perf_counter()
        gql(http, base, ADD, s=session_id, x=0.25 + 0.05 * ((n + click) % 8))
        clicks.append(time.perf_counter() - started)
    with http.post(
        f"{base}/propagate_in_video", json={"session_id": session_id}, stream=True, timeout=600
    ) as stream:
        parts = 0
        for chunk in stream.iter_content(chunk_size=None):
            parts += chunk.count(b"--frame\r\n")
            if role == "cancels" and parts >= 10:
                gql(http, base, CANCEL, s=session_id)
            if role == "hangs up" and parts >= 10:
                break
    if role != "expires":
        gql(http, base, CLOSE, s=session_id)
    return clicks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    # every client comes from 127.0.0.1: no per-client cap
    env = {
        "MAX_SESSIONS": str(args.clients),
        "MAX_SESSIONS_PER_CLIENT": "0",
        "SESSION_IDLE_TIMEOUT_SEC": str(IDLE_TIMEOUT_SEC),
    }
    with served(**env) as server:
        base = server.base_url
        visit(base, "closes", 0)  # warm-up: the engine's first use, the video's first decode
        idle = server.rss_mb()
        peak, after, clicks, seconds = idle, [], [], []
        sampling = True

        def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, server.rss_mb())
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for _ in range(args.rounds):
            roles = [ROLES[n % len(ROLES)] for n in range(args.clients)]
            started = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(max_workers=args.clients) as pool:
                for times in pool.map(visit, [base] * args.clients, roles, range(args.clients)):
                    clicks += times
            seconds.append(time.perf_counter() - started)
            time.sleep(IDLE_TIMEOUT_SEC + 2)  # the "expires" sessions go...
            http = requests.Session()  # ...at the next session operation's sweep
            swept = gql(http, base, START, p=PATH)["startSession"]["sessionId"]
            gql(http, base, CLOSE, s=swept)
            after.append(server.rss_mb())
        sampling = False
        sampler.join()
        http = requests.Session()
        opened = [gql(http, base, START, p=PATH) for _ in range(args.clients)]
        for data in opened:
            gql(http, base, CLOSE, s=data["startSession"]["sessionId"])

    clicks.sort()
    print(f"{args.clients} clients at once, {args.rounds} rounds, 854x480 x 144 frames")
    print(f"  a round took {', '.join(f'{s:.0f}' for s in seconds)} s")
    median, p90 = statistics.median(clicks), clicks[int(0.9 * (len(clicks) - 1))]
    print(f"  clicks under load: median {median * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms")
    print(f"  server memory: idle {idle:.0f} MB, peak {peak:.0f} MB, after each round "
          f"{', '.join(f'{mb:.0f}' for mb in after)} MB")  # fmt: skip
    print(f"  afterwards {len(opened)} of {args.clients} sessions could be opened again")


if __name__ == "__main__":
    main()
