"""Sessions in inference workers behind web processes (issue 18), all real processes on
loopback with a real Redis: two web processes route every operation to the worker that holds
the session, whichever of them receives it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
import requests

from segmentation.errors import TooManySessions
from segmentation.workers.client import WorkerClient
from segmentation.workers.registry import WorkerRegistry, worker_info_new
from tests.conftest import (
    ROOT,
    free_port,
    migrated,
    project_env,
    running_server,
    server_pid,
)
from tests.segmentation.synthetic import make_video, write_mp4
from tests.segmentation.test_propagation_stream import (
    click,
    click_input,
    graphql,
    parts,
    propagate,
    start_session,
)
from tests.system.test_scale_out import REDIS_URL, needs_redis

pytestmark = needs_redis

TTL_SEC = 2
SESSIONS = 20
SHORT_FRAMES = 12


class Workers:
    """Inference worker processes sharing the tests' registry prefix."""

    def __init__(self, var: Path, env: dict[str, str]) -> None:
        self._var = var
        self._env = env
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> subprocess.Popen:
        log = (self._var / f"worker-{name}.log").open("w")
        process = subprocess.Popen(
            [sys.executable, "manage.py", "segmentation_worker", "--name", name],
            cwd=ROOT,
            env=self._env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes[name] = process
        return process

    def log(self, name: str) -> str:
        return (self._var / f"worker-{name}.log").read_text()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def registered(prefix: str) -> dict[str, dict]:
    """The registry, by worker name."""
    client = redis.Redis.from_url(REDIS_URL)
    keys = client.keys(f"{prefix}:worker:*")
    return {info["name"]: info for info in (json.loads(v) for v in client.mget(keys) if v)}


def wait_for(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s")


def worker_settings(**more: str) -> dict[str, str]:
    """The environment of web processes and workers of one test's layout (its own registry)."""
    return {
        "REDIS_URL": REDIS_URL,
        "SEGMENTATION_WORKERS": "1",
        "SEGMENTATION_WORKERS_PREFIX": f"test-workers-{uuid.uuid4().hex[:8]}",
        "SEGMENTATION_WORKER_TTL_SEC": str(TTL_SEC),
        "MAX_SESSIONS_PER_CLIENT": "0",  # the test's clients all come from 127.0.0.1
        **more,
    }


@contextlib.contextmanager
def worker_running(var: Path, env: dict[str, str], name: str) -> Iterator[subprocess.Popen]:
    """A worker process, once it has registered; killed on exit."""
    workers = Workers(var, env)
    try:
        with _worker(workers, env["SEGMENTATION_WORKERS_PREFIX"], name) as process:
            yield process
    finally:
        workers.stop()


@pytest.fixture(scope="module")
def layout_var(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The layout's VAR_DIR (its database, its logs)."""
    return tmp_path_factory.mktemp("workers-var")


@pytest.fixture(scope="module")
def layout_settings() -> dict[str, str]:
    """The environment of the layout's web processes and workers (beyond ``project_env``)."""
    return worker_settings(MAX_SESSIONS="16")


@pytest.fixture(scope="module")
def layout(
    tmp_path_factory: pytest.TempPathFactory, layout_var: Path, layout_settings: dict[str, str]
) -> Iterator[tuple[list[str], Workers, str]]:
    var = layout_var
    videos = tmp_path_factory.mktemp("workers-videos")
    short = write_mp4(make_video(SHORT_FRAMES), videos / "short.mp4")
    long = write_mp4(make_video(240), videos / "long.mp4")
    extra = layout_settings
    prefix = extra["SEGMENTATION_WORKERS_PREFIX"]
    env = project_env(var, **extra)
    migrated(env)
    workers = Workers(var, env)
    try:
        for name in ("a", "b"):
            workers.start(name)
        # each web process imports one of the videos into the gallery when first asked for its
        # default video, as `manage.py import_videos` would (the same import, without a Django
        # process of its own)
        with (
            running_server(
                var, log_name="web-one.log", DEFAULT_VIDEO_PATH=str(short), **extra
            ) as one,
            running_server(
                var, log_name="web-two.log", DEFAULT_VIDEO_PATH=str(long), **extra
            ) as two,
        ):
            for front, path in ((one, "gallery/short.mp4"), (two, "gallery/long.mp4")):
                imported = requests.get(
                    f"{front}/graphql", params={"query": "{ defaultVideo { path } }"}, timeout=60
                )
                assert imported.json() == {"data": {"defaultVideo": {"path": path}}}
            wait_for(lambda: set(registered(prefix)) == {"a", "b"})
            yield [one, two], workers, prefix
    finally:
        workers.stop()


def worker_of(session_id: str) -> str:
    return session_id.rpartition(".")[0].rsplit("-", 1)[0]


def masks_of(answer: dict) -> list[int]:
    return [mask["objectId"] for mask in answer["rleMaskList"]]


ADD = """mutation($input: AddPointsInput!) {
  addPoints(input: $input) { frameIndex rleMaskList { objectId rleMask { size counts } } } }"""
CLEAR_FRAME = """mutation($input: ClearPointsInFrameInput!) {
  clearPointsInFrame(input: $input) { frameIndex rleMaskList { objectId } } }"""
CLEAR_VIDEO = """mutation($input: ClearPointsInVideoInput!) {
  clearPointsInVideo(input: $input) { success } }"""
REMOVE = """mutation($input: RemoveObjectInput!) {
  removeObject(input: $input) { frameIndex rleMaskList { objectId } } }"""
CANCEL = """mutation($input: CancelPropagateInVideoInput!) {
  cancelPropagateInVideo(input: $input) { success } }"""
CLOSE = """mutation($input: CloseSessionInput!) { closeSession(input: $input) { success } }"""


def test_sessions_spread_over_the_workers_and_every_operation_reaches_its_own(layout):
    fronts, _, prefix = layout
    before = {name: info["operations"] for name, info in registered(prefix).items()}
    sessions = [start_session(fronts[n % 2], "gallery/short.mp4") for n in range(SESSIONS)]

    assert len(set(sessions)) == SESSIONS
    assert sorted(worker_of(s) for s in sessions).count("a") == SESSIONS // 2
    for n, session_id in enumerate(sessions):
        # each operation through the other front than the one before
        web = [fronts[n % 2], fronts[(n + 1) % 2]]
        first = click(web[0], session_id, 1, 4)["data"]["addPoints"]
        assert first["frameIndex"] == 4
        second = graphql(web[1], ADD, input=click_input(session_id, 2, 4))["data"]["addPoints"]
        assert masks_of(second) == [1, 2]  # the first click's object is still there: same state
        cleared = graphql(
            web[0], CLEAR_FRAME, input={"sessionId": session_id, "frameIndex": 4, "objectId": 2}
        )["data"]["clearPointsInFrame"]
        assert masks_of(cleared) == [1, 2]
        assert cleared["frameIndex"] == 4

    session_id = sessions[0]
    with propagate(fronts[1], session_id, 4) as response:
        order = [json.loads(body)["frame_index"] for _, body in parts(response)]
    assert order == [4, 5, 6, 7, 8, 9, 10, 11, 3, 2, 1, 0]
    export = requests.get(f"{fronts[0]}/annotations/{session_id}.json", timeout=30)
    assert export.status_code == 200
    assert len(export.json()["frames"]) == SHORT_FRAMES
    removed = graphql(fronts[0], REMOVE, input={"sessionId": session_id, "objectId": 1})
    assert [frame["frameIndex"] for frame in removed["data"]["removeObject"]] == [4]
    reset = graphql(fronts[1], CLEAR_VIDEO, input={"sessionId": session_id})
    assert reset["data"]["clearPointsInVideo"]["success"] is True

    for n, session_id in enumerate(sessions):
        closed = graphql(fronts[n % 2], CLOSE, input={"sessionId": session_id})
        assert closed["data"]["closeSession"]["success"] is True
    # per session: open, two clicks, a clear and the close; 5 more on the first one (its
    # export asks where its work is kept first: nowhere, for a session of no owner)
    after = wait_for(lambda: _after_beat(prefix, before))
    assert sum(after.values()) == SESSIONS * 5 + 5
    assert {name: info["load"] for name, info in registered(prefix).items()} == {"a": 0, "b": 0}


def _after_beat(prefix: str, before: dict[str, int]) -> dict[str, int] | None:
    now = registered(prefix)
    done = {name: info["operations"] - before[name] for name, info in now.items()}
    return done if sum(done.values()) >= SESSIONS * 5 + 5 else None


@contextlib.contextmanager
def _worker(workers: Workers, prefix: str, name: str) -> Iterator[subprocess.Popen]:
    process = workers.start(name)
    wait_for(lambda: name in registered(prefix))
    yield process


def test_a_range_reaches_the_worker_holding_the_session(layout):
    fronts, _, _ = layout
    session_id = start_session(fronts[0], "gallery/short.mp4")
    click(fronts[0], session_id, 1, 4)

    with propagate(fronts[1], session_id, 4, direction="forward", end_frame_index=10) as response:
        forward = [json.loads(body)["frame_index"] for _, body in parts(response)]
    with propagate(fronts[0], session_id, 8, direction="backward", end_frame_index=2) as response:
        backward = [json.loads(body)["frame_index"] for _, body in parts(response)]
    refused = requests.post(
        f"{fronts[1]}/propagate_in_video",
        json={"session_id": session_id, "start_frame_index": 4, "end_frame_index": 12},
        timeout=10,
    )
    closed = graphql(fronts[0], CLOSE, input={"sessionId": session_id})

    assert forward == [4, 5, 6, 7, 8, 9, 10]
    assert backward == [8, 7, 6, 5, 4, 3, 2]
    assert (refused.status_code, refused.json()) == (
        400,
        {
            "error": "end frame index 12 is outside the video's frames 0..11",
            "code": "BAD_USER_INPUT",
        },
    )
    assert closed["data"]["closeSession"]["success"] is True


def test_a_killed_worker_s_sessions_are_not_found_and_the_others_go_on(layout):
    fronts, workers, prefix = layout
    survivors = _one_each(fronts[0], {"a", "b"})
    with _worker(workers, prefix, "doomed") as doomed:
        # the new worker has the most free places, so it takes the next session
        victim = start_session(fronts[0], "gallery/long.mp4")
        assert worker_of(victim) == "doomed"
        click(fronts[0], victim, 1, 0)
        with propagate(fronts[1], victim, 0) as response:
            received = 0
            for _ in parts(response):  # the stream ends cleanly, short of its total
                received += 1
                if received == 2:
                    doomed.send_signal(signal.SIGKILL)
                    killed = time.monotonic()
        assert 2 <= received < 240
        assert time.monotonic() - killed < TTL_SEC + 2

        answer = click(fronts[1], victim, 1, 0)
        assert answer["errors"][0]["extensions"]["code"] == "SESSION_NOT_FOUND"
        for survivor in survivors:
            assert click(fronts[1], survivor, 1, 4)["data"]["addPoints"]["frameIndex"] == 4
            graphql(fronts[0], CLOSE, input={"sessionId": survivor})
        wait_for(lambda: "doomed" not in registered(prefix))


def _one_each(front: str, names: set[str]) -> list[str]:
    """A session on each of the workers ``names``, all as empty as each other before."""
    sessions = [start_session(front, "gallery/short.mp4") for _ in names]
    assert {worker_of(session) for session in sessions} == names
    return sessions


def test_a_stopped_worker_drains_its_sessions_then_leaves(layout):
    fronts, workers, prefix = layout
    others = _one_each(fronts[0], {"a", "b"})
    with _worker(workers, prefix, "leaving") as leaving:
        session_id = start_session(fronts[0], "gallery/long.mp4")
        assert worker_of(session_id) == "leaving"
        click(fronts[0], session_id, 1, 0)
        with propagate(fronts[1], session_id, 0) as response:
            stream = parts(response)
            next(stream)
            leaving.send_signal(signal.SIGTERM)
            # draining: no new session goes there, and the running propagation completes
            other = start_session(fronts[0], "gallery/short.mp4")
            assert worker_of(other) in {"a", "b"}
            frames = 1 + sum(1 for _ in stream)
        assert frames == 240
        assert leaving.wait(timeout=10) == 0
        assert "leaving" not in registered(prefix)
        assert "draining" in workers.log("leaving")
        answer = click(fronts[1], session_id, 1, 0)
        assert answer["errors"][0]["extensions"]["code"] == "SESSION_NOT_FOUND"
        for session in [*others, other]:
            graphql(fronts[0], CLOSE, input={"sessionId": session})


def test_a_client_that_hangs_up_stops_the_worker_s_propagation(layout):
    fronts, _, _ = layout
    session_id = start_session(fronts[0], "gallery/long.mp4")
    click(fronts[0], session_id, 1, 0)
    started = time.monotonic()
    with propagate(fronts[1], session_id, 0) as response:
        assert sum(1 for _ in parts(response)) == 240
    whole = time.monotonic() - started

    # the click again remakes frame 0's anchor, so the next propagation recomputes every frame
    # (with nothing changed it would pass the stored masks through at once)
    click(fronts[0], session_id, 1, 0)
    response = propagate(fronts[1], session_id, 0)
    next(parts(response))
    response.close()

    # the worker stops and releases the session's lock: a click through the other front is
    # answered long before the rest of the propagation could have run
    started = time.monotonic()
    assert click(fronts[0], session_id, 1, 10)["data"]["addPoints"]["frameIndex"] == 10
    waited = time.monotonic() - started
    assert whole > 1.0, whole
    assert waited < whole / 3, (waited, whole)
    graphql(fronts[0], CLOSE, input={"sessionId": session_id})


def test_no_free_place_anywhere_answers_too_many_sessions():
    prefix = f"test-workers-{uuid.uuid4().hex[:8]}"
    client = WorkerClient(redis_url=REDIS_URL, prefix=prefix, ttl_seconds=TTL_SEC)
    try:
        with pytest.raises(TooManySessions) as none:
            client.open(video_path="gallery/short.mp4", file="/nowhere/short.mp4")
        asyncio.run(_announce_full(prefix))
        with pytest.raises(TooManySessions) as occupied:
            client.open(video_path="gallery/short.mp4", file="/nowhere/short.mp4")
    finally:
        client.shutdown()

    assert str(none.value) == "no inference worker is running; try again later"
    assert str(occupied.value) == (
        "every inference worker holds its maximum of sessions; try again later"
    )


async def _announce_full(prefix: str) -> None:
    """A worker in the registry whose every place is taken."""
    full = worker_info_new(name="full", engine="classic", device="cpu", capacity=2)
    connection = aioredis.Redis.from_url(REDIS_URL)
    registry = WorkerRegistry(connection, prefix=prefix, ttl_seconds=5)
    await registry.announce(full.with_load(2, 0, draining=False))
    await connection.aclose()


def test_the_annotator_names_the_engine_of_the_worker_holding_the_session(layout):
    fronts, _, _ = layout
    session_id = start_session(fronts[0], "gallery/short.mp4")

    page = requests.get(f"{fronts[1]}/annotate/", timeout=10).text
    named = requests.get(f"{fronts[1]}/sessions/{session_id}/engine", timeout=10)
    closed = graphql(fronts[0], CLOSE, input={"sessionId": session_id})
    gone = requests.get(f"{fronts[1]}/sessions/{session_id}/engine", timeout=10)

    # the page is drawn naming none (this process holds no engine); the session's worker names
    # its own, through either web process, until the session is closed
    assert '">Engine: inference workers</span>' in page
    assert (named.status_code, named.json()) == (
        200,
        {"engine": "classic: no weights, CPU", "keeps_work": False},  # opened with no cookie
    )
    assert closed["data"]["closeSession"]["success"] is True
    assert (gone.status_code, gone.json()["code"]) == (404, "SESSION_NOT_FOUND")


def test_a_propagation_job_runs_on_its_worker_through_a_restart_of_the_front(
    layout, layout_var: Path, layout_settings: dict[str, str]
):
    # given the layout's workers, and a front of its own where an annotator started a
    # propagation job
    extra = layout_settings
    browser = requests.Session()
    with running_server(layout_var, port=free_port(), log_name="front.log", **extra) as front:
        browser.get(f"{front}/annotate/", timeout=30)
        session_id = browser.post(
            f"{front}/graphql",
            json={
                "query": 'mutation { startSession(input: {path: "gallery/long.mp4"}) '
                "{ sessionId } }"
            },
            headers={"X-Keep-Work": "1"},
            timeout=60,
        ).json()["data"]["startSession"]["sessionId"]
        graphql(front, ADD, input=click_input(session_id, 1, 0))
        answer = browser.post(
            f"{front}/sessions/{session_id}/propagation",
            json={"start_frame_index": 0, "direction": "forward"},
            timeout=30,
        )
        job_id = answer.json()["job"]["id"]

        def job(server: str) -> dict:
            jobs = browser.get(f"{server}/propagations", timeout=10).json()["jobs"]
            return next(job for job in jobs if job["id"] == job_id)

        # when the front is killed while the job runs
        wait_for(lambda: job(front)["done"] >= 10)
        os.kill(server_pid(front), signal.SIGKILL)

    # then a front started again finds the job gone on meanwhile, and ending on the worker
    with running_server(layout_var, log_name="front-again.log", **extra) as front:
        ended = wait_for(lambda: (j := job(front))["status"] != "running" and j, 60)
        assert (ended["status"], ended["done"], ended["frames"]) == ("done", 240, 240)
        assert ended["session_id"] == session_id  # never taken up elsewhere
        closed = graphql(front, CLOSE, input={"sessionId": session_id})
        assert closed["data"]["closeSession"]["success"] is True
