"""Hostile clients against the real server, beside honest ones (issues 36 and 47).

    .venv/bin/python benchmarks/hostile_clients.py [--kinds KIND,...] [--hostile 8] [--clicks 30]

Every kind by default; ``--kinds`` picks some (comma-separated). Each hostile client has an
address of its own behind the trusted proxy (``X-Forwarded-For`` over loopback, as nginx sends
it); the server runs with default settings (classic engine) on the drawn default video.

Engine clicks (issue 36, finding 2). One person's session clicks on frame 0, alternating two
points, one click at a time with a pause of 0.2 s between clicks: first alone, then while
``--hostile`` clients, each with its own session, send requests back to back, never waiting for
``Retry-After`` (but the ``within`` clients, which do as the budget says):

- ``aliased``: the finding's request, ten aliased ``addPoints`` of 100 random points, each on
  its own frame and object (cost 4130, over ``GRAPHQL_MAX_COST``): how fast each is refused;
- ``within``: the dearest click the cost admits, 21 points on a new frame each time, until the
  session's engine budget answers ``RESOURCE_EXHAUSTED``, then again when it says to.

Prints first the round trip of the aliased request alone, refused for its cost. Then, for each
kind, the person's click round trip (median and 90th percentile) against its
unloaded median, and what the hostile clients were answered (by code, with the median answer
time). The server's CPU time over each phase comes from /proc.

One address against the server (issue 47, items 3 to 7), on a server relaying a 4 Mbit/s
channel (``hostile_viewers.live_channel``), one attack after the other:

- ``sessions``: ``startSession`` back to back for 3 s; then another client opens one;
- ``websocket``: three connections at a time send ``{"type": "refresh"}`` to
  ``/ws/tv/status`` as fast as they can, each connecting again when closed or refused (its
  upgrade answered 429 past ``WEBSOCKET_CONNECTS_PER_CLIENT``, counted by status), for 8 s;
- ``login``: 100 wrong passwords for the staff user (made with ``manage.py``) sent to
  ``/admin/login/`` at once; then the right one from another address;
- ``import``: the finding's file (30 frames x 10 objects, one click each) posted to
  ``/sessions/<id>/annotations`` back to back for 30 s, honouring nothing, the last request
  hung up at the end;
- ``export``: 70 MB of ``{}`` (within the server's body cap) posted to ``coco.json``,
  ``yolo.zip`` and ``masks.zip`` at once, again and again for 8 s, honouring nothing;
- ``hangup``: a valid file at the default ``MAX_ANNOTATIONS_MB`` (8) of masks of isolated
  pixels (the dearest to convert) posted to the three exports at once, each hung up after 4 s
  (``--hangup-sec``).

The attacks run in a process of their own at niceness ``--attacker-nice`` (19): on this one
machine, the attacker's own Python would otherwise take the honest probes' interpreter lock (they
ran in one process until issue 47's third round) and a share of the two cores that a remote
attacker does not take. 0 gives it the server's priority.

Beside them, all along, the honest side: a click (``addPoints`` of one point on frame 0 of a
session of its own, from an address of its own, 0.5 s apart), ``GET /healthz`` and a ``/ts``
viewer's first byte (0.2 s apart each), and the server's CPU and RSS (every 0.1 s). First
CALM_SEC with no attack (the calm medians), then each attack and AFTER_SEC after it. For each
attack: what the attacker was answered; each honest probe's median during the attack against its
calm median; how long after the attack's end the honest side was last over 2x calm (by the median of
three samples in a row) or refused; how long the server's CPU stayed over its calm rate; the
server CPU-seconds over the attack and its aftermath beyond the calm rate (the attacker's
cost); the server's peak RSS. A table of these ends the run.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import contextlib
import http.client
import json
import multiprocessing
import os
import random
import re
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import requests  # noqa: E402
import websockets  # noqa: E402

from benchmarks.fanout import cpu_seconds, rss_mb  # noqa: E402
from benchmarks.hostile_viewers import live_channel, watch  # noqa: E402
from benchmarks.local_server import Served, manage, served  # noqa: E402
from benchmarks.stats import nearest_rank  # noqa: E402
from segmentation.rle import rle_encode  # noqa: E402

POINTS = ([0.78, 0.5], [0.3, 0.45])
FRAMES = 144
START = 'mutation { startSession(input: {path: "gallery/default.mp4"}) { sessionId } }'
CLICK = "mutation($input: AddPointsInput!) { addPoints(input: $input) { frameIndex } }"
PAUSE_SEC = 0.2
ENGINE_KINDS = ("aliased", "within")
ATTACKS = ("sessions", "websocket", "login", "import", "export", "hangup")
KINDS = ENGINE_KINDS + ATTACKS


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


def engine_phases(base_url: str, pid: int, kinds: list[str], options: argparse.Namespace) -> None:
    person(base_url, 3)  # warm up
    refusals = refusal_alone(base_url, options.clicks)
    print(f"the aliased request alone, refused: {summary(refusals)}")
    alone = person(base_url, options.clicks)
    print(f"the person alone: {summary(alone)}")
    for kind in kinds:
        result = phase(base_url, pid, kind, options.hostile, options.clicks)
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


# ---- one address against the server (issue 47, items 3 to 7)

CALM_SEC = 10.0
AFTER_SEC = 15.0
HONEST = "192.0.2.1"  # the honest person's address
OTHER = "192.0.2.2"  # another client, after an attack
WARM_SEC = 5.0
HONEST_CLICK_PAUSE_SEC = 0.5  # about 110 clicks a minute of cost 17: within RATE_LIMIT_COST
PROBE_PAUSE_SEC = 0.2
CALM_RUN = {"click": 3, "healthz": 5, "ts": 5}  # about 1.5 s of samples
USAGE_EVERY_SEC = 0.1
BUSY_WINDOW_SEC = 1.0
BUSY_CORES = 0.25  # over the calm rate: the server still works for the attack
SESSIONS_SEC = 3.0
WEBSOCKET_SEC = 8.0
WEBSOCKETS = 3
REFRESH = json.dumps({"type": "refresh"})
LOGINS = 100
STAFF, PASSWORD = "admin", "correct horse battery staple"
IMPORT_SEC = 60.0
EXPORT_SEC = 8.0
EXPORTS = ("/annotations/coco.json", "/annotations/yolo.zip", "/annotations/masks.zip")
JUNK = b"{}" * (35 * 2**20)  # 70 MB: under the server's body cap (MAX_UPLOAD_MB 70, and 64 KB)
ANNOTATIONS_CAP = 8 * 2**20  # MAX_ANNOTATIONS_MB's default
HANGUP_SEC = 4.0
HEIGHT, WIDTH = 480, 854  # the drawn default video's


def attacker(kind: str) -> str:
    """The one address each attack comes from."""
    return f"203.0.113.{ATTACKS.index(kind) + 1}"


class Sample(NamedTuple):
    probe: str
    started: float
    ended: float
    seconds: float | None  # None: refused or failed


class Honest:
    """The honest side, probing in threads until closed: a click on a session of its own,
    /healthz and a /ts viewer's first byte; and the server's CPU and RSS."""

    PROBES = ("click", "healthz", "ts")

    def __init__(self, server: Served) -> None:
        self.server = server
        self.host, port = urlsplit(server.base_url).netloc.split(":")
        self.port = int(port)
        self.http = requests.Session()
        self.http.headers["X-Forwarded-For"] = HONEST
        self.session_id = start(self.http, server.base_url)
        self.clicks = 0
        for _ in range(3):  # warm up
            self.click()
        self.samples: list[Sample] = []
        self.usage: list[tuple[float, float, float]] = []  # (time, CPU-s, RSS MB)
        self.stopped = threading.Event()
        loops = (
            (self.click, HONEST_CLICK_PAUSE_SEC),
            (self.healthz, PROBE_PAUSE_SEC),
            (self.first_byte, PROBE_PAUSE_SEC),
        )
        self.threads = [
            threading.Thread(target=self.probe, args=(name, call, pause), daemon=True)
            for name, (call, pause) in zip(self.PROBES, loops, strict=True)
        ]
        self.threads.append(threading.Thread(target=self.sample_usage, daemon=True))
        for thread in self.threads:
            thread.start()

    def close(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=120)

    def click(self) -> float | None:
        point = POINTS[self.clicks % 2]
        self.clicks += 1
        payload = {
            "query": CLICK,
            "variables": {"input": click_input(self.session_id, frame=0, points=[point])},
        }
        started = time.perf_counter()
        answer = self.http.post(f"{self.server.base_url}/graphql", json=payload, timeout=120)
        took = time.perf_counter() - started
        return took if answer.json() == {"data": {"addPoints": {"frameIndex": 0}}} else None

    def healthz(self) -> float | None:
        started = time.perf_counter()
        answer = requests.get(f"{self.server.base_url}/healthz", timeout=120)
        return time.perf_counter() - started if answer.status_code == 200 else None

    def first_byte(self) -> float | None:
        watched = watch(self.host, self.port, seconds=0)
        return None if watched is None else watched[0]

    def probe(self, name: str, call: Callable[[], float | None], pause: float) -> None:
        while not self.stopped.is_set():
            started = time.monotonic()
            try:
                seconds = call()
            except (OSError, ValueError, requests.RequestException, http.client.HTTPException):
                seconds = None
            self.samples.append(Sample(name, started, time.monotonic(), seconds))
            self.stopped.wait(pause)

    def sample_usage(self) -> None:
        while not self.stopped.is_set():
            pid = self.server.pid
            self.usage.append((time.monotonic(), cpu_seconds(pid), rss_mb(pid)))
            self.stopped.wait(USAGE_EVERY_SEC)

    def cpu_at(self, moment: float) -> float:
        """The server's CPU-seconds at the last sample up to ``moment``."""
        return [cpu for at, cpu, _ in self.usage if at <= moment][-1]

    def medians(self, begin: float, end: float) -> dict[str, float | None]:
        """Each probe's median over the samples begun in [begin, end], refusals left out."""
        medians = {}
        for name in self.PROBES:
            served_ok = [
                s.seconds
                for s in self.samples
                if s.probe == name and begin <= s.started <= end and s.seconds is not None
            ]
            medians[name] = statistics.median(served_ok) if served_ok else None
        return medians

    def back_after(self, name: str, calm: float, end: float) -> float | None:
        """Seconds from ``end`` to the start of the probe's first calm stretch after it:
        CALM_RUN[name] samples in a row within twice ``calm`` (0: the first began by ``end``);
        None if there was none within AFTER_SEC. A later lone slow sample (the shared machine's
        noise) does not count."""
        after = [s for s in self.samples if s.probe == name and s.ended > end]
        run = CALM_RUN[name]
        for first in range(len(after) - run + 1):
            if after[first].started > end + AFTER_SEC:
                break
            stretch = after[first : first + run]
            if all(s.seconds is not None and s.seconds <= 2 * calm for s in stretch):
                return max(0.0, stretch[0].started - end)
        return None

    def busy_after(self, end: float, calm_rate: float) -> float:
        """Seconds after ``end`` until the last window of BUSY_WINDOW_SEC in which the server
        used more than BUSY_CORES over its calm rate."""
        last = 0.0
        moment = end
        while moment + BUSY_WINDOW_SEC <= end + AFTER_SEC:
            used = self.cpu_at(moment + BUSY_WINDOW_SEC) - self.cpu_at(moment)
            if used / BUSY_WINDOW_SEC > calm_rate + BUSY_CORES:
                last = moment + BUSY_WINDOW_SEC - end
            moment += BUSY_WINDOW_SEC / 2
        return last

    def peak_rss(self, begin: float, end: float) -> float:
        return max(rss for at, _, rss in self.usage if begin <= at <= end)


def staff_user_create(server: Served) -> None:
    env = {**os.environ, "VAR_DIR": str(server.var_dir), "DJANGO_SUPERUSER_PASSWORD": PASSWORD}
    env.pop("DATABASE_URL", None)
    manage("createsuperuser", "--noinput", f"--username={STAFF}", "--email=a@example.org", env=env)


def graphql_code(answer: dict) -> str:
    return answer["errors"][0]["extensions"]["code"] if "errors" in answer else "ok"


def sessions_attack(server: Served) -> dict:
    """startSession back to back from one address for SESSIONS_SEC; then another client's."""
    http = requests.Session()
    http.headers["X-Forwarded-For"] = attacker("sessions")
    opened, answers = [], collections.Counter()
    started = time.monotonic()
    while time.monotonic() - started < SESSIONS_SEC:
        answer = http.post(f"{server.base_url}/graphql", json={"query": START}, timeout=60).json()
        answers[graphql_code(answer)] += 1
        if "errors" not in answer:
            opened.append(answer["data"]["startSession"]["sessionId"])
    other = requests.post(
        f"{server.base_url}/graphql",
        json={"query": START},
        headers={"X-Forwarded-For": OTHER},
        timeout=60,
    ).json()
    close = "mutation($s: String!) { closeSession(input: {sessionId: $s}) { success } }"
    for session_id in opened:
        http.post(
            f"{server.base_url}/graphql",
            json={"query": close, "variables": {"s": session_id}},
            timeout=60,
        )
    return {
        "calls": sum(answers.values()),
        "answers": dict(answers),
        "another client": graphql_code(other),
    }


async def websocket_flood(base_url: str, address: str) -> dict:
    """WEBSOCKETS connections at a time sending refreshes as fast as each takes them, their
    answers read beside them (so that the server's close is seen), each connecting again once
    closed, or at once when its upgrade is refused (``Retry-After`` not honoured), for
    WEBSOCKET_SEC."""
    url = base_url.replace("http", "ws", 1) + "/ws/tv/status"
    deadline = time.monotonic() + WEBSOCKET_SEC
    codes: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    refused: collections.Counter = collections.Counter()

    async def flood(feed: websockets.ClientConnection) -> None:
        counts["connections"] += 1

        async def read() -> None:
            with contextlib.suppress(websockets.ConnectionClosed):
                async for _ in feed:
                    counts["answers"] += 1

        reader = asyncio.create_task(read())
        with contextlib.suppress(websockets.ConnectionClosed, ConnectionError):
            while time.monotonic() < deadline and not reader.done():
                await feed.send(REFRESH)
                counts["sent"] += 1
                if counts["sent"] % 20 == 0:
                    await asyncio.sleep(0)  # let the readers take what came
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), 2)
        reader.cancel()
        received = feed.protocol.close_rcvd
        codes["open at the end" if received is None else received.code] += 1

    async def one() -> None:
        while time.monotonic() < deadline:
            try:
                feed = await websockets.connect(
                    url, origin=base_url, additional_headers={"X-Forwarded-For": address}
                )
            except websockets.InvalidStatus as refusal:
                refused[refusal.response.status_code] += 1
                continue
            async with feed:
                await flood(feed)

    await asyncio.gather(*(one() for _ in range(WEBSOCKETS)))
    return {**counts, "closed with": dict(codes), "refused": dict(refused)}


def websocket_attack(server: Served) -> dict:
    return asyncio.run(websocket_flood(server.base_url, attacker("websocket")))


def login_token(base_url: str, address: str) -> tuple[str, dict[str, str]]:
    page = requests.get(
        f"{base_url}/admin/login/", headers={"X-Forwarded-For": address}, timeout=60
    )
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return token, {"csrftoken": page.cookies["csrftoken"]}


def login_attack(server: Served) -> dict:
    """LOGINS wrong passwords released at the same moment from one address; then the right one
    from another."""
    address = attacker("login")
    token, cookies = login_token(server.base_url, address)
    at_once = threading.Barrier(LOGINS)

    def post(password: str, address: str, wait: bool) -> int:
        if wait:
            at_once.wait(timeout=60)
        return requests.post(
            f"{server.base_url}/admin/login/",
            {"username": STAFF, "password": password, "csrfmiddlewaretoken": token},
            cookies=cookies,
            headers={"X-Forwarded-For": address},
            allow_redirects=False,
            timeout=300,
        ).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=LOGINS) as pool:
        guesses = pool.map(post, [f"wrong{n}" for n in range(LOGINS)], [address] * LOGINS,
                           [True] * LOGINS)  # fmt: skip
        statuses = collections.Counter(guesses)
    right = post(PASSWORD, OTHER, False)
    return {
        "answers": {str(status): count for status, count in sorted(statuses.items())},
        "the right password from another address": right,
    }


def empty_mask() -> dict:
    return rle_encode(np.zeros((HEIGHT, WIDTH), bool))


def import_file() -> bytes:
    """The finding's file: 30 frames x 10 objects, one click each (an empty mask beside it,
    as an export lists a clicked object)."""
    spots = random.Random(47)
    mask = empty_mask()
    frames = [
        {
            "frame_index": frame,
            "objects": [
                {
                    "object_id": object_id,
                    "mask": mask,
                    "points": [[round(spots.uniform(0.2, 0.8), 4) for _ in range(2)]],
                    "labels": [1],
                }
                for object_id in range(1, 11)
            ],
        }
        for frame in range(30)
    ]
    return json.dumps({"video": "gallery/default.mp4", "frames": frames}).encode()


def import_attack(server: Served) -> dict:
    """The finding's file posted back to back for IMPORT_SEC, whatever the answers say, the
    request still running at the end hung up."""
    http = requests.Session()
    http.headers["X-Forwarded-For"] = attacker("import")
    http.headers["Content-Type"] = "application/json"
    session_id = start(http, server.base_url)
    body = import_file()
    answers: collections.Counter = collections.Counter()
    imported = 0
    deadline = time.monotonic() + IMPORT_SEC
    while (left := deadline - time.monotonic()) > 0:
        try:
            answer = http.post(
                f"{server.base_url}/sessions/{session_id}/annotations",
                data=body,
                timeout=(5, left),
            )
        except requests.Timeout:
            answers["hung up"] += 1
            break
        content = answer.json()
        answers[f"{answer.status_code} {content.get('code', '')}".strip()] += 1
        if answer.status_code == 200:
            imported += len(content["frames"])
        else:
            imported += len(content.get("imported_frames", ()))
    http.close()
    return {"file KB": len(body) // 1024, "answers": dict(answers), "frames imported": imported}


def export_attack(server: Served) -> dict:
    """JUNK posted to each export at once, back to back for EXPORT_SEC, honouring nothing."""
    answers: collections.Counter = collections.Counter()
    deadline = time.monotonic() + EXPORT_SEC

    def flood(path: str) -> None:
        http = requests.Session()
        http.headers["X-Forwarded-For"] = attacker("export")
        http.headers["Content-Type"] = "application/json"
        while time.monotonic() < deadline:
            answer = http.post(f"{server.base_url}{path}", data=JUNK, timeout=120)
            code = answer.json().get("code", "") if answer.status_code != 200 else ""
            answers[f"{answer.status_code} {code}".strip()] += 1

    threads = [threading.Thread(target=flood, args=(path,)) for path in EXPORTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"posts of 70 MB": sum(answers.values()), "answers": dict(answers)}


def isolated_pixels_file() -> bytes:
    """Frames of one mask of isolated pixels (102,480 parts, the dearest to convert) each, as
    many as fit under ANNOTATIONS_CAP."""
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[::2, ::2] = True
    item = {"object_id": 1, "mask": rle_encode(mask)}
    frame_bytes = len(json.dumps({"frame_index": 100, "objects": [item]})) + 2
    count = (ANNOTATIONS_CAP - 100) // frame_bytes
    frames = [{"frame_index": n, "objects": [item]} for n in range(count)]
    return json.dumps({"video": "gallery/default.mp4", "frames": frames}).encode()


def hangup_attack(server: Served, hangup_sec: float = HANGUP_SEC) -> dict:
    """The file of isolated pixels posted to each export at once, each hung up after
    ``hangup_sec`` (or answered before)."""
    body = isolated_pixels_file()
    host, port = urlsplit(server.base_url).netloc.split(":")
    answers: dict[str, str] = {}

    def post(path: str) -> None:
        with socket.create_connection((host, int(port))) as connection:
            head = (
                f"POST {path} HTTP/1.1\r\nHost: {host}\r\nX-Forwarded-For: {attacker('hangup')}"
                f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            connection.sendall(head.encode() + body)
            connection.settimeout(hangup_sec)
            try:
                answer = connection.recv(4096)
                answers[path] = answer.split(b"\r\n", 1)[0].decode(errors="replace")
            except TimeoutError:
                answers[path] = "hung up"

    threads = [threading.Thread(target=post, args=(path,)) for path in EXPORTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    frames = body.count(b'"frame_index"')
    return {"file": f"{len(body) / 2**20:.1f} MB, {frames} masks", "answers": answers}


ATTACK_FUNCTIONS = {
    "sessions": sessions_attack,
    "websocket": websocket_attack,
    "login": login_attack,
    "import": import_attack,
    "export": export_attack,
    "hangup": hangup_attack,
}


def calm_phase(honest: Honest, title: str) -> tuple[dict[str, float], float]:
    """CALM_SEC of the honest side with no attack: each probe's median, and the server's rate
    of CPU (cores)."""
    begin = time.monotonic()
    time.sleep(CALM_SEC)
    end = time.monotonic()
    calm = honest.medians(begin, end)
    rate = (honest.cpu_at(end) - honest.cpu_at(begin)) / (end - begin)
    medians = ", ".join(f"{name} {seconds * 1000:.1f} ms" for name, seconds in calm.items())
    rss = honest.peak_rss(begin, end)
    print(f"{title}: {medians}, server {rate:.2f} cores, RSS {rss:.0f} MB", flush=True)
    return calm, rate


def run_attack(kind: str, server: Served, hangup_sec: float) -> dict:
    """One attack, as the attacker's process runs it."""
    if kind == "hangup":
        return hangup_attack(server, hangup_sec)
    return ATTACK_FUNCTIONS[kind](server)


def attacker_process(niceness: int) -> concurrent.futures.ProcessPoolExecutor:
    """The attacker's process, started and ready: a remote attacker's own work takes neither
    the honest clients' cores nor their interpreter's lock (the probes run in this process)."""
    context = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(
        1, mp_context=context, initializer=os.nice, initargs=(niceness,)
    )
    pool.submit(int).result()  # imported and waiting
    return pool


def attack_phases(kinds: list[str], options: argparse.Namespace) -> list[dict]:
    with live_channel() as server, attacker_process(options.attacker_nice) as attacker:
        if "login" in kinds:
            staff_user_create(server)
        honest = Honest(server)
        try:
            time.sleep(WARM_SEC)
            calm, calm_rate = calm_phase(honest, "calm")
            rows = []
            for kind in kinds:
                begin = time.monotonic()
                got = attacker.submit(run_attack, kind, server, options.hangup_sec).result()
                end = time.monotonic()
                time.sleep(AFTER_SEC)
                during = honest.medians(begin, end)
                cpu = honest.cpu_at(end + AFTER_SEC) - honest.cpu_at(begin)
                row = {
                    "attack": kind,
                    "seconds": round(end - begin, 1),
                    "got": got,
                    "during": {
                        name: during_text(during[name], calm[name]) for name in Honest.PROBES
                    },
                    "refused during": sum(
                        1 for s in honest.samples if begin <= s.started <= end and s.seconds is None
                    ),
                    "honest back after s": {
                        name: honest.back_after(name, calm[name], end) for name in Honest.PROBES
                    },
                    "server busy after s": honest.busy_after(end, calm_rate),
                    "cpu_s": round(cpu - calm_rate * (end + AFTER_SEC - begin), 1),
                    "peak_rss_mb": round(honest.peak_rss(begin, end + AFTER_SEC)),
                }
                print(row, flush=True)
                rows.append(row)
            calm_phase(honest, "calm again, after the attacks")
        finally:
            honest.close()
            if options.dump is not None:
                samples = [sample._asdict() for sample in honest.samples]
                options.dump.write_text(json.dumps({"samples": samples, "usage": honest.usage}))
        log = (server.var_dir / "daphne.log").read_text(errors="replace")
        print(
            {
                "tracebacks in the server's log": log.count("Traceback"),
                "exports stopped as their client went": log.count("stopped: the client went"),
            }
        )
    return rows


def during_text(seconds: float | None, calm: float) -> str:
    return "none served" if seconds is None else f"{seconds * 1000:.1f} ms ({seconds / calm:.2f}x)"


def back_after(seconds: dict[str, float | None]) -> str:
    """The latest probe's time back to calm, and which it was."""
    if any(value is None for value in seconds.values()):
        late = [name for name, value in seconds.items() if value is None]
        return f"> {AFTER_SEC:.0f} s ({', '.join(late)})"
    name = max(seconds, key=seconds.get)
    return "0 s" if seconds[name] == 0 else f"{seconds[name]:.1f} s ({name})"


def table(rows: list[dict]) -> str:
    lines = [
        "| attack | s | click | healthz | /ts first byte | honest back after | server busy after "
        "| attacker CPU-s | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        during = [row["during"][name] for name in Honest.PROBES]
        lines.append(
            f"| {row['attack']} | {row['seconds']} | {' | '.join(during)} "
            f"| {back_after(row['honest back after s'])} | {row['server busy after s']:.1f} s "
            f"| {row['cpu_s']} | {row['peak_rss_mb']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hostile", type=int, default=8)
    parser.add_argument("--clicks", type=int, default=30)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--hangup-sec", type=float, default=HANGUP_SEC)
    parser.add_argument(
        "--attacker-nice",
        type=int,
        default=19,
        help="the attacker's process's niceness (0: it competes with the server for the cores)",
    )
    parser.add_argument("--dump", type=Path, help="a JSON file for the honest side's samples")
    options = parser.parse_args()
    kinds = options.kinds.split(",")
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        parser.error(f"unknown kinds {unknown}; the kinds are {', '.join(KINDS)}")
    engine = [kind for kind in kinds if kind in ENGINE_KINDS]
    if engine:
        with served() as server:
            engine_phases(server.base_url, server.pid, engine, options)
    attacks = [kind for kind in kinds if kind in ATTACKS]
    if attacks:
        rows = attack_phases(attacks, options)
        print(table(rows))


if __name__ == "__main__":
    main()
