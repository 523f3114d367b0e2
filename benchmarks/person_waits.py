"""Three paths a person waits on (issue 48, item 8): importing an annotation file, the YOLO export
of the same file, and ``manage.py sam2_weights list``.

    .venv/bin/python benchmarks/person_waits.py [--rounds 3]

Runs the real server (daphne, the classic engine) on the drawn default video (854 x 480, 144
frames). The file is made as a person makes one: three objects clicked once each (the ball and
the box on frame 0, the star on frame 24, where it has come in), the whole video propagated,
and the session's annotations exported (``GET /annotations/<id>.json``); that client's clicks
and propagation are charged to its cost limit as a person's are. Then, ``--rounds`` times:

- the import: ``POST /sessions/<id>/annotations`` into a new session, from the click until every
  frame's masks are back, continued as the annotator page continues it when the client's limit
  or the session's engine budget stops it part way (it waits the answer's ``Retry-After`` and
  sends the remaining frames with ``?append=1``);
- the YOLO export: ``POST /annotations/yolo.zip`` with the same file, to the last byte.

The import and the export of a round come from the same address as the clicks that made the
file, within the same minute, as they would from the person's tab. Last, ``manage.py
sam2_weights list`` is run ``--rounds`` times with an empty models folder (a fresh clone's), as
its own process, from start to exit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import requests  # noqa: E402

from benchmarks.local_server import served  # noqa: E402
from segmentation.demo_video import HEIGHT, WIDTH, demo_masks  # noqa: E402

PATH = "gallery/default.mp4"
# Each object clicked once, where it is in view: (name, frame).
OBJECTS = (("ball", 0), ("box", 0), ("star", 24))
START = "mutation($p: String!) { startSession(input: {path: $p}) { sessionId } }"
ADD = """mutation($s: String!, $f: Int!, $o: Int!, $x: Float!, $y: Float!) {
  addPoints(input: {sessionId: $s, frameIndex: $f, objectId: $o, clearOldPoints: true,
                    labels: [1], points: [[$x, $y]]}) { frameIndex }
}"""
CLOSE = "mutation($s: String!) { closeSession(input: {sessionId: $s}) { success } }"


def gql(http: requests.Session, base: str, query: str, **variables: object) -> dict:
    answer = http.post(f"{base}/graphql", json={"query": query, "variables": variables}, timeout=60)
    body = answer.json()
    if body.get("errors"):
        raise RuntimeError(body["errors"][0]["message"])
    return body["data"]


def inside(mask: np.ndarray) -> tuple[float, float]:
    """A point of the object nearest its centre, normalized as addPoints takes it."""
    ys, xs = np.nonzero(mask)
    nearest = np.argmin((xs - xs.mean()) ** 2 + (ys - ys.mean()) ** 2)
    return float(xs[nearest]) / (WIDTH - 1), float(ys[nearest]) / (HEIGHT - 1)


def annotation_file(http: requests.Session, base: str) -> bytes:
    session_id = gql(http, base, START, p=PATH)["startSession"]["sessionId"]
    for object_id, (name, frame) in enumerate(OBJECTS, 1):
        x, y = inside(demo_masks(frame)[name])
        gql(http, base, ADD, s=session_id, f=frame, o=object_id, x=x, y=y)
    with http.post(
        f"{base}/propagate_in_video", json={"session_id": session_id}, stream=True, timeout=600
    ) as stream:
        for _ in stream.iter_content(chunk_size=None):
            pass
    exported = http.get(f"{base}/annotations/{session_id}.json", timeout=60)
    exported.raise_for_status()
    gql(http, base, CLOSE, s=session_id)
    return exported.content


def imported(http: requests.Session, base: str, body: bytes) -> tuple[float, int]:
    """Seconds until every frame is imported into a new session, and how many times the import
    was stopped part way and continued (as the annotator page does)."""
    import json

    data = json.loads(body)
    session_id = gql(http, base, START, p=PATH)["startSession"]["sessionId"]
    frames, append, stops = data["frames"], False, 0
    started = time.perf_counter()
    while True:
        answer = http.post(
            f"{base}/sessions/{session_id}/annotations" + ("?append=1" if append else ""),
            json={"video": data["video"], "frames": frames},
            timeout=600,
        )
        if answer.status_code == 200:
            break
        wait = answer.headers.get("Retry-After")
        if answer.status_code != 429 or wait is None:
            raise RuntimeError(f"import: {answer.status_code} {answer.text[:300]}")
        done = set(answer.json().get("imported_frames", []))
        frames = [frame for frame in frames if frame["frame_index"] not in done]
        append = append or bool(done)
        stops += 1
        time.sleep(float(wait))
    seconds = time.perf_counter() - started
    gql(http, base, CLOSE, s=session_id)
    return seconds, stops


def yolo_export(http: requests.Session, base: str, body: bytes) -> float:
    started = time.perf_counter()
    answer = http.post(
        f"{base}/annotations/yolo.zip",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=600,
    )
    seconds = time.perf_counter() - started
    if answer.status_code != 200:
        raise RuntimeError(f"YOLO export: {answer.status_code} {answer.text[:300]}")
    return seconds


def weights_list(rounds: int) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as var:
        env = {**os.environ, "VAR_DIR": var}
        env.pop("SEGMENTATION_ENGINE", None)  # chosen from the (empty) models folder, as unset
        for _ in range(rounds):
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "manage.py", "sam2_weights", "list"],
                cwd=ROOT,
                env=env,
                check=True,
                capture_output=True,
            )
            times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    imports, stops, exports = [], [], []
    with served(SEGMENTATION_ENGINE="classic") as server:
        http = requests.Session()
        body = annotation_file(http, server.base_url)
        for _ in range(args.rounds):
            seconds, stopped = imported(http, server.base_url, body)
            imports.append(seconds)
            stops.append(stopped)
            exports.append(yolo_export(http, server.base_url, body))
    lists = weights_list(args.rounds)

    def shown(times: list[float]) -> str:
        each = ", ".join(f"{t:.2f}" for t in times)
        return f"median {statistics.median(times):.2f} s ({each})"

    print(f"annotation file: {len(body) / 1000:.0f} kB, 144 frames, {len(OBJECTS)} objects")
    print(f"  import until every frame's masks are back: {shown(imports)}")
    print(f"    stopped part way and continued: {', '.join(map(str, stops))} times")
    print(f"  YOLO export of the same file: {shown(exports)}")
    print(f"manage.py sam2_weights list, empty models folder: {shown(lists)}")


if __name__ == "__main__":
    main()
