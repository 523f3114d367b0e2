"""What the API adds to the engine: ``addPoints`` over GraphQL, and the propagation stream.

    .venv/bin/python benchmarks/api_overhead.py [--clicks 40] [--propagations 3] [--worker]

Prepares the default video (854 x 480, 144 frames) in a temporary VAR_DIR and runs the real
server (daphne) on it. The same clicks are then answered twice: by the engine in this process
(``add_points`` on a state over the same file) and by the server (``addPoints`` over HTTP, one
keep-alive connection). The clicks alternate between two points, so each is a full first cut.
The API's overhead is each round trip less the engine's time in that request, which the server
reports in its ``Server-Timing`` header. ``ping`` queries (no engine) give the round trip and the
server's CPU time of the smallest request. Then the whole video is propagated both ways: the
engine's generator here, and ``POST /propagate_in_video`` read to its last part.

With ``--worker`` (needs Redis), a second server runs beside the first with the engine in an
inference worker behind its web process (docs/deploy.md); the two take turns click by click
and propagation by propagation, and the script prints what the worker path adds to the round
trip and how its stream compares.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from benchmarks.fanout import cpu_seconds  # noqa: E402
from benchmarks.local_server import served  # noqa: E402

POINTS = ([0.78, 0.5], [0.3, 0.45])
PINGS = 300
ADD = """mutation($input: AddPointsInput!) {
  addPoints(input: $input) { frameIndex rleMaskList { objectId rleMask { counts size } } }
}"""


def engine_side(video: Path, clicks: int) -> tuple[list[float], float]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from segmentation.engines.classic import ClassicEngine
    from segmentation.engines.frames import VideoFileFrames

    frames = VideoFileFrames(video, cache_bytes=64 * 1024 * 1024)
    state = ClassicEngine().open(frames)
    seconds = []
    for n in range(clicks):
        started = time.perf_counter()
        state.add_points(frame_index=0, object_id=1, points=[POINTS[n % 2]], labels=[1])
        seconds.append(time.perf_counter() - started)
    started = time.perf_counter()
    count = sum(1 for _ in state.propagate(start_frame_index=0))
    return seconds, count / (time.perf_counter() - started)


class ServerClient:
    """One session on a server, clicked and propagated over one keep-alive connection."""

    def __init__(self, base: str, path: str) -> None:
        self._base = base
        self._http = requests.Session()
        answer = self._graphql(
            "mutation($input: StartSessionInput!) { startSession(input: $input) { sessionId } }",
            input={"path": path},
        )
        self._session_id = answer.json()["data"]["startSession"]["sessionId"]
        self.clicks: list[tuple[float, float]] = []  # (round trip, engine) per click
        self.rates: list[float] = []  # frames per second per propagation

    def _graphql(self, query: str, **variables: object) -> requests.Response:
        body = {"query": query, "variables": variables}
        return self._http.post(f"{self._base}/graphql", json=body, timeout=60)

    def click(self, n: int) -> None:
        """Click the n-th point, noting the round trip and the engine's time (its
        Server-Timing header)."""
        started = time.perf_counter()
        response = self._graphql(
            ADD,
            input={
                "sessionId": self._session_id,
                "frameIndex": 0,
                "objectId": 1,
                "clearOldPoints": True,
                "labels": [1],
                "points": [POINTS[n % 2]],
            },
        )
        round_trip = time.perf_counter() - started
        if "errors" in response.json():
            raise SystemExit(f"addPoints failed: {response.text}")
        engine = float(response.headers["Server-Timing"].split("dur=")[1]) / 1000
        self.clicks.append((round_trip, engine))

    def pings(self, count: int) -> list[float]:
        """Round trips of ``ping``, the smallest request on a session."""
        query = "query($input: PingInput!) { ping(input: $input) { success } }"
        seconds = []
        for _ in range(count):
            started = time.perf_counter()
            response = self._graphql(query, input={"sessionId": self._session_id})
            seconds.append(time.perf_counter() - started)
            if response.json() != {"data": {"ping": {"success": True}}}:
                raise SystemExit(f"ping failed: {response.text}")
        return seconds

    def propagate(self) -> None:
        started = time.perf_counter()
        with self._http.post(
            f"{self._base}/propagate_in_video",
            json={"session_id": self._session_id},
            stream=True,
            timeout=300,
        ) as response:
            body = b"".join(response.iter_content(chunk_size=None))
        self.rates.append(body.count(b"--frame\r\n") / (time.perf_counter() - started))


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clicks", type=int, default=40)
    parser.add_argument("--propagations", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help="also through an inference worker")
    args = parser.parse_args()
    path = "gallery/default.mp4"
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(served())
        video = server.var_dir / "media" / "gallery" / "default.mp4"
        engine_clicks, engine_fps = engine_side(video, args.clicks)
        clients = [ServerClient(server.base_url, path)]
        clients[0].pings(20)
        cpu_before = cpu_seconds(server.pid)
        pings = clients[0].pings(PINGS)
        ping_cpu = (cpu_seconds(server.pid) - cpu_before) / PINGS
        if args.worker:
            clients.append(ServerClient(stack.enter_context(served(workers=1)).base_url, path))
        # The layouts take turns, click by click, so that the machine's drifts hit both alike.
        for n in range(args.clicks):
            for client in clients:
                client.click(n)
        for _ in range(args.propagations):
            for client in clients:
                client.propagate()

    single = clients[0]
    api_fps = statistics.median(single.rates)
    print(f"{args.clicks} clicks on 854x480, each a first cut; medians:")
    print(f"  engine, in this process            {ms(engine_clicks):7.1f} ms")
    print(f"  engine, in the server              {ms([e for _, e in single.clicks]):7.1f} ms")
    print(f"  addPoints over HTTP (round trip)   {ms([t for t, _ in single.clicks]):7.1f} ms")
    overhead = ms([t - e for t, e in single.clicks])
    print(f"  API overhead (round trip - engine) {overhead:7.1f} ms (target <= 10 ms)")
    print(
        f"{PINGS} pings (no engine): round trip {ms(pings):.1f} ms median, "
        f"server CPU {ping_cpu * 1000:.1f} ms each"
    )
    print(
        f"propagation of 144 frames: engine {engine_fps:.1f} frames/s, stream {api_fps:.1f} "
        f"(median of {args.propagations})"
    )
    print(f"  the stream delivers {api_fps / engine_fps:.0%} of the engine's rate")
    if not args.worker:
        return
    worker = clients[1]
    worker_fps = statistics.median(worker.rates)
    print("through a web process and an inference worker (clicks taking turns with the above):")
    print(f"  engine, in the worker              {ms([e for _, e in worker.clicks]):7.1f} ms")
    print(f"  addPoints over HTTP (round trip)   {ms([t for t, _ in worker.clicks]):7.1f} ms")
    worker_overhead = ms([t - e for t, e in worker.clicks])
    print(f"  API overhead (round trip - engine) {worker_overhead:7.1f} ms")
    added = worker_overhead - overhead
    print(f"  added by the worker path           {added:7.1f} ms (target <= 5 ms)")
    print(
        f"propagation through the worker: {worker_fps:.1f} frames/s, "
        f"{worker_fps / api_fps:.0%} of the single process's stream (target >= 90%)"
    )


if __name__ == "__main__":
    main()
