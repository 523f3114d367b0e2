"""Hour-long videos through the real server: flat memory and work the server keeps (issue 50).

    .venv/bin/python benchmarks/long_video.py [--minutes 60] [--parts upload,classic,sam2,kill,zip]
        [--kill-at FRAME] [--sam2-frames 2000] [--sam2-sample-every 250] [--cache DIR]

Everything goes through the real server (``benchmarks/local_server.py``) as a person's browser
or a client uses it: a cookie session (``GET /annotate/`` first), GraphQL with
``X-Keep-Work: 1`` as the annotator sends it, the gallery's ``POST /uploads``, propagation jobs
and the exports. The video is made here (PyAV, H.264 at 854x480, 24 fps, a key frame every 2 s
so that the server keeps it as uploaded, remuxed: a textured disc moving over a gradient) and
kept in ``--cache`` for later runs. Each measurement is printed as a JSON line as it ends, and a
table sums them up at the end.

- ``upload``: the video of ``--minutes`` uploaded through ``POST /uploads`` and followed with
  ``GET /uploads/<id>`` until ready; meanwhile another client clicks (``addPoints``) on a
  session of the default video every ``--click-every`` seconds: its round trips against its
  idle median, measured just before (target: at most 2x).
- ``classic``: a session of the person's on that video, one click on the disc on frame 0, a
  forward propagation job over the whole video (``POST /sessions/<id>/propagation``), polled
  through ``GET /propagations``: frames/s, and the server's RSS (``/proc/<pid>/status``) after
  the click and at every 1,000 frames done (target: the last at most the first + 64 MB).
- ``kill``: another person, the same click and job, the server SIGKILLed once the job has
  stored ``--kill-at`` frames (default a third of the video) and started again on the same
  VAR_DIR: every frame ``GET /propagations`` said was done just before the kill must be in the
  work a new session of that person reads (``GET /sessions/<id>/work``); the job must be taken
  up and finish; then its export (``GET /annotations/<session>.json`` of a session opened after
  the end) is compared, byte for byte, with the uninterrupted ``classic`` run's (run here if
  ``classic`` is not among the parts).
- ``zip``: the whole video's DAVIS ZIP (``GET /annotations/<session>/masks.zip``) read at full
  speed and thrown away, sampling every 50 ms the server's RSS and that of each of its child
  processes (the export's): the peaks above their idle (target: at most 100 MB).
- ``sam2``: a server with ``SEGMENTATION_ENGINE=sam2`` on EdgeTAM with random weights in the
  official layout (``benchmarks/sam2_speed.py``'s ``random_checkpoint``), a video of
  ``--sam2-frames`` uploaded the same way, one click and a forward job: the server's RSS every
  ``--sam2-sample-every`` frames, and its growth per 1,000 frames (target: at most 10 MB).

``upload``, ``classic``, ``kill`` and ``zip`` share one classic server and VAR_DIR (``kill``
restarts it); the parts that need the video upload it if ``upload`` is not asked for.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import av  # noqa: E402
import numpy as np  # noqa: E402
import requests  # noqa: E402

from benchmarks.local_server import Served, served  # noqa: E402
from segmentation.video_preparation import frames_in_place  # noqa: E402

WIDTH, HEIGHT, FPS = 854, 480, 24
GOP = 2 * FPS  # a key frame every 2 s: the server remuxes what has one at least every 5 s
DISC = 56  # the disc's radius in pixels
PARTS = ("upload", "classic", "kill", "zip", "sam2")
POLL_SEC = 0.2
SAMPLE_SEC = 0.05
HTTP_TIMEOUT = 120

START = "mutation($input: StartSessionInput!) { startSession(input: $input) { sessionId } }"
CLOSE = "mutation($input: CloseSessionInput!) { closeSession(input: $input) { success } }"
ADD = """mutation($input: AddPointsInput!) {
  addPoints(input: $input) { frameIndex rleMaskList { objectId rleMask { counts size } } }
}"""
VIDEO = "query($id: GlobalID!) { node(id: $id) { ... on Video { path frameCount } } }"
DEFAULT_VIDEO = "{ defaultVideo { path } }"


# --- the video -------------------------------------------------------------------------------


def disc_centre(index: int) -> tuple[float, float]:
    """Where the disc is on frame ``index``: a slow Lissajous path that keeps it whole in view
    (at most about 6 pixels a frame)."""
    seconds = index / FPS
    x = WIDTH / 2 + (WIDTH / 2 - DISC - 20) * math.sin(2 * math.pi * seconds / 17)
    y = HEIGHT / 2 + (HEIGHT / 2 - DISC - 20) * math.sin(2 * math.pi * seconds / 11 + 0.5)
    return x, y


def long_video(path: Path, frames: int) -> Path:
    """An H.264 MP4 of ``frames`` frames at 854x480 and 24 fps: a checkered disc moving over a
    gradient (something a tracker follows, with masks that are not trivial). Kept at ``path``
    and only made when it is not there yet."""
    if path.exists():
        return path
    ys, xs = np.mgrid[0:HEIGHT, 0:WIDTH]
    background = np.stack(
        [40 + 120 * xs / WIDTH, 60 + 100 * ys / HEIGHT, 150 - 80 * xs / WIDTH], axis=-1
    ).astype(np.uint8)
    side = 2 * DISC + 1
    dy, dx = np.mgrid[-DISC : DISC + 1, -DISC : DISC + 1]
    inside = dx * dx + dy * dy <= DISC * DISC
    checks = ((dx // 14 + dy // 14) % 2).astype(bool)
    stamp = np.where(checks[..., None], (235, 200, 40), (200, 40, 50)).astype(np.uint8)
    partial = path.with_suffix(".part.mp4")
    started = time.perf_counter()
    with av.open(str(partial), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.codec_context.gop_size = GOP
        stream.options = {"preset": "ultrafast", "sc_threshold": "0"}
        for index in range(frames):
            picture = background.copy()
            x, y = (round(c) for c in disc_centre(index))
            region = picture[y - DISC : y - DISC + side, x - DISC : x - DISC + side]
            np.copyto(region, stamp, where=inside[..., None])
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, FPS)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    if frames_in_place(partial, fps=FPS) != frames:
        raise SystemExit(f"{partial}: not a file the server would keep as uploaded")
    partial.rename(path)
    report(
        "video made",
        path=str(path),
        frames=frames,
        mb=round(path.stat().st_size / 2**20, 1),
        seconds=round(time.perf_counter() - started, 1),
    )
    return path


# --- the measurements ------------------------------------------------------------------------

RESULTS: list[dict] = []


def report(what: str, **figures: object) -> dict:
    line = {"what": what, **figures}
    RESULTS.append(line)
    print(json.dumps(line), flush=True)
    return line


def rss_of(pid: int) -> float | None:
    """A process's resident memory in MB; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


class Person:
    """A browser's cookie session on the server, as the annotator page makes it."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = requests.Session()
        self.http.get(f"{base_url}/annotate/", timeout=HTTP_TIMEOUT).raise_for_status()

    def graphql(self, query: str, **variables: object) -> dict:
        answer = self.http.post(
            f"{self.base_url}/graphql",
            json={"query": query, "variables": variables},
            headers={"X-Keep-Work": "1"},
            timeout=HTTP_TIMEOUT,
        )
        body = answer.json()
        if "errors" in body:
            raise SystemExit(f"GraphQL refused: {body['errors']}")
        return body["data"]

    def session(self, path: str) -> str:
        return self.graphql(START, input={"path": path})["startSession"]["sessionId"]

    def close(self, session_id: str) -> None:
        self.graphql(CLOSE, input={"sessionId": session_id})

    def click_disc(self, session_id: str) -> None:
        """A positive click on the disc's centre on frame 0 (object 1)."""
        x, y = disc_centre(0)
        point = [x / (WIDTH - 1), y / (HEIGHT - 1)]
        self.graphql(
            ADD,
            input={
                "sessionId": session_id,
                "frameIndex": 0,
                "objectId": 1,
                "clearOldPoints": True,
                "labels": [1],
                "points": [point],
            },
        )

    def job_start(self, session_id: str) -> dict:
        answer = self.http.post(
            f"{self.base_url}/sessions/{session_id}/propagation",
            json={"start_frame_index": 0, "direction": "forward"},
            timeout=HTTP_TIMEOUT,
        )
        if answer.status_code != 201:
            raise SystemExit(f"the job was refused: {answer.status_code} {answer.text}")
        return answer.json()["job"]

    def job(self, job_id: int) -> dict:
        jobs = self.http.get(f"{self.base_url}/propagations", timeout=HTTP_TIMEOUT).json()["jobs"]
        return next(job for job in jobs if job["id"] == job_id)

    def upload(self, video: Path) -> dict:
        with video.open("rb") as content:
            answer = self.http.post(
                f"{self.base_url}/uploads",
                files={"file": (video.name, content, "video/mp4")},
                timeout=3600,
            )
        if answer.status_code != 202:
            raise SystemExit(f"the upload was refused: {answer.status_code} {answer.text}")
        return answer.json()

    def export(self, session_id: str) -> bytes:
        answer = self.http.get(
            f"{self.base_url}/annotations/{session_id}.json", timeout=HTTP_TIMEOUT * 10
        )
        answer.raise_for_status()
        return answer.content


def job_followed(
    person: Person, job_id: int, *, on_progress: Callable[[dict], None] = lambda job: None
) -> dict:
    """The job polled until it ends, ``on_progress`` told each answer; its last state."""
    while True:
        job = person.job(job_id)
        on_progress(job)
        if job["status"] != "running":
            return job
        time.sleep(POLL_SEC)


@dataclass
class Uploaded:
    path: str
    frames: int


def uploaded(server: Served, video: Path, *, clicks: bool, click_every: float) -> Uploaded:
    """``video`` through the gallery's ``POST /uploads``, followed until ready; with
    ``clicks``, another client's clicks on the default video timed meanwhile (and idle first)."""
    person = Person(server.base_url)
    clicker = Clicker(server.base_url) if clicks else None
    if clicker:
        idle = clicker.timed(seconds=None, count=20, every=click_every)
    started = time.perf_counter()
    stop = threading.Event()
    busy: list[float] = []
    thread = None
    if clicker:
        thread = threading.Thread(
            target=lambda: busy.extend(clicker.timed(stop=stop, every=click_every))
        )
        thread.start()
    try:
        upload = person.upload(video)
        sent = time.perf_counter() - started
        while upload["state"] not in {"ready", "failed"}:
            time.sleep(POLL_SEC)
            answer = person.http.get(
                f"{server.base_url}/uploads/{upload['id']}", timeout=HTTP_TIMEOUT
            )
            upload = answer.json()
        ready = time.perf_counter() - started
    finally:
        stop.set()
        if thread:
            thread.join()
    if upload["state"] != "ready":
        raise SystemExit(f"the upload failed: {upload['failure']}")
    node = person.graphql(VIDEO, id=upload["video"])["node"]
    figures: dict[str, object] = {
        "frames": node["frameCount"],
        "mb": round(video.stat().st_size / 2**20, 1),
        "sent_s": round(sent, 1),
        "ready_s": round(ready, 1),
    }
    if clicker:
        idle_median = statistics.median(idle)
        figures |= {
            "click_idle_median_ms": round(idle_median * 1000, 1),
            "click_busy_count": len(busy),
            "click_busy_median_ms": round(statistics.median(busy) * 1000, 1) if busy else None,
            "click_busy_max_ms": round(max(busy) * 1000, 1) if busy else None,
            "click_median_ratio": round(statistics.median(busy) / idle_median, 2) if busy else None,
            "click_max_ratio": round(max(busy) / idle_median, 2) if busy else None,
        }
        clicker.close()
    report("upload to ready", **figures)
    return Uploaded(node["path"], node["frameCount"])


class Clicker:
    """Another client: clicks on a session of the default video, alternating two points so
    that each is a full first cut, as ``api_overhead.py`` does."""

    POINTS = ([0.78, 0.5], [0.3, 0.45])

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = requests.Session()
        path = self._graphql(DEFAULT_VIDEO)["defaultVideo"]["path"]
        self.session_id = self._graphql(START, input={"path": path})["startSession"]["sessionId"]
        self.count = 0

    def _graphql(self, query: str, **variables: object) -> dict:
        answer = self.http.post(
            f"{self.base_url}/graphql",
            json={"query": query, "variables": variables},
            timeout=HTTP_TIMEOUT,
        )
        body = answer.json()
        if "errors" in body:
            raise SystemExit(f"GraphQL refused: {body['errors']}")
        return body["data"]

    def click(self) -> float:
        point = self.POINTS[self.count % 2]
        self.count += 1
        started = time.perf_counter()
        self._graphql(
            ADD,
            input={
                "sessionId": self.session_id,
                "frameIndex": 0,
                "objectId": 1,
                "clearOldPoints": True,
                "labels": [1],
                "points": [point],
            },
        )
        return time.perf_counter() - started

    def timed(
        self,
        *,
        every: float,
        seconds: float | None = None,
        count: int | None = None,
        stop: threading.Event | None = None,
    ) -> list[float]:
        times: list[float] = []
        while (count is None or len(times) < count) and not (stop and stop.is_set()):
            times.append(self.click())
            time.sleep(max(every - times[-1], 0))
        return times

    def close(self) -> None:
        self._graphql(CLOSE, input={"sessionId": self.session_id})


@dataclass
class Propagated:
    session_id: str
    job: dict
    export: bytes = b""
    rss: list[tuple[int, float]] = field(default_factory=list)


def propagated(
    server: Served,
    video: Uploaded,
    *,
    every: int,
    what: str,
    person: Person | None = None,
    export: bool = True,
) -> Propagated:
    """A person's session on the video, one click on the disc, a forward job over the whole
    video followed to its end with the server's RSS after the click and every ``every`` frames
    done; then the export of a session opened after the end."""
    person = person or Person(server.base_url)
    session_id = person.session(video.path)
    person.click_disc(session_id)
    samples = [(0, server.rss_mb())]
    print(
        json.dumps({"what": f"{what}: after the click", "rss_mb": round(samples[0][1], 1)}),
        flush=True,
    )
    started = time.perf_counter()
    job = person.job_start(session_id)

    def sample(job: dict) -> None:
        if job["done"] >= samples[-1][0] + every:
            samples.append((job["done"], server.rss_mb()))
            # as it goes, so that a run stopped part way still says how far it came
            seconds = round(time.perf_counter() - started, 1)
            print(json.dumps({"what": f"{what}: progress", "done": job["done"],
                              "seconds": seconds, "rss_mb": round(samples[-1][1], 1)}),
                  flush=True)  # fmt: skip

    job = job_followed(person, job["id"], on_progress=sample)
    seconds = time.perf_counter() - started
    if job["status"] != "done":
        raise SystemExit(f"the job ended {job['status']}: {job['reason']}")
    if samples[-1][0] != job["done"]:
        samples.append((job["done"], server.rss_mb()))
    first, last = samples[0][1], samples[-1][1]
    at_every = [rss for done, rss in samples if done >= every]
    report(
        what,
        frames=job["done"],
        seconds=round(seconds, 1),
        frames_per_s=round(job["done"] / seconds, 2),
        rss_first_mb=round(first, 1),
        rss_last_mb=round(last, 1),
        rss_growth_mb=round(last - first, 1),
        rss_growth_from_first_every_mb=round(last - at_every[0], 1) if at_every else None,
        rss_growth_per_1000_mb=round(growth_per_1000(samples), 2),
        rss_samples=[[done, round(rss, 1)] for done, rss in samples],
    )
    person.close(session_id)
    result = Propagated(session_id, job, rss=samples)
    if export:
        result.export = exported(person, video)
    return result


def growth_per_1000(samples: list[tuple[int, float]]) -> float:
    """The least-squares slope of RSS against frames done, per 1,000 frames, from the first
    sample after the click's (which comes before the engine's caches and memories fill)."""
    samples = samples[1:] if len(samples) >= 3 else samples
    if len(samples) < 2:
        return float("nan")
    frames = np.array([done for done, _ in samples], float)
    rss = np.array([value for _, value in samples], float)
    return float(np.polyfit(frames, rss, 1)[0] * 1000)


def exported(person: Person, video: Uploaded) -> bytes:
    """The annotation export of a new session of the person's on the video (opened once no job
    runs on the work, so from the store)."""
    session_id = person.session(video.path)
    try:
        return person.export(session_id)
    finally:
        person.close(session_id)


def killed_and_resumed(
    var_dir: Path, env: dict[str, str], video: Uploaded, kill_at: int, reference: bytes
) -> None:
    """A job SIGKILLed once it has stored ``kill_at`` frames, the server started again on the
    same VAR_DIR: what the client saw done is stored, the job is taken up and finishes, and its
    export is compared with ``reference`` (the same click, never interrupted)."""
    with served(var_dir=var_dir, **env) as server:
        person = Person(server.base_url)
        session_id = person.session(video.path)
        person.click_disc(session_id)
        job = person.job_start(session_id)
        while (job := person.job(job["id"]))["done"] < kill_at:
            if job["status"] != "running":
                raise SystemExit(f"the job ended before {kill_at} frames: {job}")
            time.sleep(0.02)
        seen = job["done"]  # what the client had seen done, just before the kill
        server.kill()
        killed = time.perf_counter()
    with served(var_dir=var_dir, **env) as server:
        listening = time.perf_counter() - killed
        person.base_url = server.base_url  # the same browser (its cookie) on the new process
        check = person.session(video.path)
        runs = stored_frames(person, check)
        at_restart = person.job(job["id"])
        person.close(check)
        seen_stored = any(first <= 0 and seen - 1 <= last for first, last in runs)
        resumed = None

        def taken_up(state: dict) -> None:
            nonlocal resumed
            if resumed is None and state["done"] > at_restart["done"]:
                resumed = time.perf_counter() - killed

        final = job_followed(person, job["id"], on_progress=taken_up)
        finished = time.perf_counter() - killed
        export = exported(person, video)
        stored_after = stored_frames_count(person, video)
    figures: dict[str, object] = {
        "frames": video.frames,
        "kill_at": kill_at,
        "seen_done": seen,
        "stored_runs_after_restart": runs,
        "every_seen_frame_stored": seen_stored,
        "done_at_restart": at_restart["done"],
        "restart_listening_s": round(listening, 1),
        "job_taken_up_s": round(resumed, 1) if resumed is not None else None,
        "job_status": final["status"],
        "job_done": final["done"],
        "job_finished_s": round(finished, 1),
        "frames_stored_at_end": stored_after,
        "export_equal": export == reference,
        "export_bytes": [len(export), len(reference)],
    }
    if export != reference:
        figures |= export_difference(export, reference)
    report("SIGKILL and restart", **figures)


def export_difference(export: bytes, reference: bytes) -> dict[str, object]:
    """Where two annotation exports differ: their frames, and the masks that are not the same."""
    ours, theirs = json.loads(export), json.loads(reference)
    masks = {
        name: {
            (frame["frame_index"], obj["object_id"]): obj
            for frame in document["frames"]
            for obj in frame["objects"]
        }
        for name, document in (("ours", ours), ("theirs", theirs))
    }
    keys = sorted(set(masks["ours"]) | set(masks["theirs"]))
    differing = [key for key in keys if masks["ours"].get(key) != masks["theirs"].get(key)]
    return {
        "export_frames": [len(ours["frames"]), len(theirs["frames"])],
        "masks_differing": len(differing),
        "first_differing": differing[:5],
        "other_fields_equal": {k: v for k, v in ours.items() if k != "frames"}
        == {k: v for k, v in theirs.items() if k != "frames"},
    }


def stored_frames_count(person: Person, video: Uploaded) -> int:
    session_id = person.session(video.path)
    try:
        return sum(last - first + 1 for first, last in stored_frames(person, session_id))
    finally:
        person.close(session_id)


def stored_frames(person: Person, session_id: str, object_id: int = 1) -> list[list[int]]:
    work = person.http.get(
        f"{person.base_url}/sessions/{session_id}/work", timeout=HTTP_TIMEOUT
    ).json()
    runs = [obj["mask_runs"] for obj in work["objects"] if obj["object_id"] == object_id]
    return runs[0] if runs else []


def zip_streamed(server: Served, person: Person, video: Uploaded) -> None:
    """The whole video's DAVIS ZIP read at full speed and dropped, the server's and its
    children's RSS sampled meanwhile."""
    session_id = person.session(video.path)
    time.sleep(2)
    idle = server.rss_mb()
    children_idle = {child: rss_of(child) for child in children_of(server.pid)}
    peaks: dict[int, float] = {}
    firsts: dict[int, float] = {}
    server_peak = idle
    done = threading.Event()

    def sample() -> None:
        nonlocal server_peak
        while not done.is_set():
            server_peak = max(server_peak, server.rss_mb())
            for child in children_of(server.pid):
                rss = rss_of(child)
                if rss is None:
                    continue
                firsts.setdefault(child, rss)
                peaks[child] = max(peaks.get(child, 0.0), rss)
            time.sleep(SAMPLE_SEC)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    size = 0
    try:
        with person.http.get(
            f"{server.base_url}/annotations/{session_id}/masks.zip", stream=True, timeout=3600
        ) as answer:
            answer.raise_for_status()
            for chunk in answer.iter_content(1 << 20):
                size += len(chunk)
    finally:
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
    person.close(session_id)
    children = {
        child: {
            "new": child not in children_idle,
            "idle_mb": round(children_idle.get(child) or firsts[child], 1),
            "peak_mb": round(peaks[child], 1),
            "above_idle_mb": round(peaks[child] - (children_idle.get(child) or firsts[child]), 1),
        }
        for child in peaks
    }
    report(
        "DAVIS ZIP streamed",
        frames=video.frames,
        mb=round(size / 2**20, 1),
        seconds=round(seconds, 1),
        server_idle_mb=round(idle, 1),
        server_peak_mb=round(server_peak, 1),
        server_above_idle_mb=round(server_peak - idle, 1),
        children=children,
    )


# --- running it ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60, help="the long video's length")
    parser.add_argument("--parts", default=",".join(PARTS), help="of " + ",".join(PARTS))
    parser.add_argument("--kill-at", type=int, help="frames done at the kill (a third)")
    parser.add_argument("--sam2-frames", type=int, default=2000)
    parser.add_argument("--sam2-sample-every", type=int, default=250, help="frames")
    parser.add_argument("--click-every", type=float, default=0.5, help="seconds, while uploading")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "long_video")
    options = parser.parse_args()
    parts = [part.strip() for part in options.parts.split(",") if part.strip()]
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    options.cache.mkdir(parents=True, exist_ok=True)
    if set(parts) - {"sam2"}:
        classic_parts(options, parts)
    if "sam2" in parts:
        sam2_part(options)
    summary()


def classic_parts(options: argparse.Namespace, parts: list[str]) -> None:
    frames = round(options.minutes * 60 * FPS)
    video = long_video(options.cache / f"disc-{frames}f-{WIDTH}x{HEIGHT}.mp4", frames)
    env = {"SEGMENTATION_ENGINE": "classic"}
    with tempfile.TemporaryDirectory() as var:
        var_dir = Path(var)
        with served(var_dir=var_dir, **env) as server:
            report("server", engine="classic", idle_rss_mb=round(server.rss_mb(), 1))
            upload = uploaded(
                server, video, clicks="upload" in parts, click_every=options.click_every
            )
            if not {"classic", "kill", "zip"} & set(parts):
                return
            person = Person(server.base_url)
            run = propagated(
                server, upload, every=1000, what="classic over the whole video", person=person
            )
            if "zip" in parts:
                zip_streamed(server, person, upload)
        if "kill" in parts:
            kill_at = options.kill_at or upload.frames // 3
            killed_and_resumed(var_dir, env, upload, kill_at, run.export)


def sam2_part(options: argparse.Namespace) -> None:
    from benchmarks.sam2_speed import random_checkpoint

    frames = options.sam2_frames
    video = long_video(options.cache / f"disc-{frames}f-{WIDTH}x{HEIGHT}.mp4", frames)
    with tempfile.TemporaryDirectory() as var:
        checkpoint = random_checkpoint("edgetam", Path(var) / "edgetam-random.pt")
        env = {"SEGMENTATION_ENGINE": "sam2", "SAM2_CHECKPOINT": str(checkpoint)}
        with served(startup_timeout=300, **env) as server:
            report("server", engine="sam2 edgetam", idle_rss_mb=round(server.rss_mb(), 1))
            upload = uploaded(server, video, clicks=False, click_every=options.click_every)
            propagated(
                server,
                upload,
                every=options.sam2_sample_every,
                what="sam2 EdgeTAM over the video",
                export=False,
            )


def summary() -> None:
    rows = []
    for line in RESULTS:
        what = line["what"]
        if what == "upload to ready":
            rows.append(
                (
                    what,
                    f"{line['frames']} frames, {line['mb']} MB: sent {line['sent_s']} s, "
                    f"ready {line['ready_s']} s",
                    "",
                )
            )
            if "click_idle_median_ms" in line:
                rows.append(
                    (
                        "click on another session meanwhile",
                        f"idle median {line['click_idle_median_ms']} ms; during: median "
                        f"{line['click_busy_median_ms']} ms, max {line['click_busy_max_ms']} ms "
                        f"({line['click_busy_count']} clicks): x{line['click_median_ratio']}, "
                        f"max x{line['click_max_ratio']}",
                        "median ≤ 2x",
                    )
                )
        elif what in {"classic over the whole video", "sam2 EdgeTAM over the video"}:
            rows.append(
                (
                    what,
                    f"{line['frames']} frames, {line['frames_per_s']} frames/s; RSS "
                    f"{line['rss_first_mb']} -> {line['rss_last_mb']} MB "
                    f"(+{line['rss_growth_mb']}), {line['rss_growth_per_1000_mb']} MB per 1,000",
                    "last ≤ first + 64 MB" if what.startswith("classic") else "≤ 10 MB per 1,000",
                )
            )
        elif what == "SIGKILL and restart":
            rows.append(
                (
                    what,
                    f"killed at {line['seen_done']} seen done; every seen frame stored: "
                    f"{line['every_seen_frame_stored']}; taken up after "
                    f"{line['job_taken_up_s']} s; "
                    f"{line['job_status']} ({line['job_done']} frames); export equal: "
                    f"{line['export_equal']}",
                    "all stored, finished, equal",
                )
            )
        elif what == "DAVIS ZIP streamed":
            children = ", ".join(
                f"{c['peak_mb']} MB (+{c['above_idle_mb']})" for c in line["children"].values()
            )
            rows.append(
                (
                    what,
                    f"{line['mb']} MB in {line['seconds']} s; server "
                    f"+{line['server_above_idle_mb']} MB "
                    f"over {line['server_idle_mb']}; children {children or 'none seen'}",
                    "≤ 100 MB above idle",
                )
            )
    width = max((len(row[0]) for row in rows), default=0)
    print()
    for what, figure, target in rows:
        print(f"{what:<{width}}  {figure}" + (f"  [{target}]" if target else ""))


if __name__ == "__main__":
    main()
