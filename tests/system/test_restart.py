"""What the server keeps survives a restart, and a playlist reload killed half-way loses nothing."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.conftest import (
    ROOT,
    free_port,
    manage,
    migrated,
    project_env,
    running_server,
    server_pid,
)
from tests.segmentation.synthetic import make_video, write_mp4

UPLOAD = "mutation($file: Upload!) { uploadVideo(file: $file) { path } }"
ANNOTATIONS = "mutation($file: Upload!) { uploadAnnotations(file: $file) }"


def upload(http: requests.Session, server: str, query: str, name: str, content: bytes) -> dict:
    answer = http.post(
        f"{server}/graphql",
        data={
            "operations": json.dumps({"query": query, "variables": {"file": None}}),
            "map": json.dumps({"0": ["variables.file"]}),
        },
        files={"0": (name, content)},
        timeout=60,
    )
    return answer.json()


def test_everything_kept_survives_a_restart(tmp_path: Path) -> None:
    port = free_port()
    env = {"SERVER_URL": f"http://127.0.0.1:{port}"}
    http = requests.Session()  # one client: its cookie carries the deletion ID
    with running_server(tmp_path, port=port, **env) as server:
        deletion_id = http.post(
            f"{server}/graphql", json={"query": "mutation { createDeletionId }"}, timeout=10
        ).json()["data"]["createDeletionId"]
        clip = write_mp4(make_video(), tmp_path / "clip.mp4").read_bytes()
        uploaded = upload(http, server, UPLOAD, "clip.mp4", clip)["data"]["uploadVideo"]["path"]
        annotations = {"video": uploaded, "frames": []}
        stored = upload(http, server, ANNOTATIONS, "a.json", json.dumps(annotations).encode())
        assert stored == {"data": {"uploadAnnotations": True}}
        selected = http.post(
            f"{server}/api/admin/channel", json={"channel_id": "demo.1"}, timeout=10
        )
        assert selected.status_code == 200
        assert http.post(f"{server}/api/admin/playlist/reload", timeout=30).status_code == 200

    with running_server(tmp_path, port=port, **env) as server:
        videos = http.post(
            f"{server}/graphql",
            json={"query": "{ videos { edges { node { path } } } }"},
            timeout=10,
        ).json()["data"]["videos"]["edges"]
        status = http.get(f"{server}/api/admin/status", timeout=10).json()
        deleted = manage("delete_user_data", deletion_id, env=project_env(tmp_path, **env))

    assert {"node": {"path": uploaded}} in videos
    assert (status["channel_name"], status["live"], status["playlist_version"]) == (
        "Test pattern 1",
        True,
        2,
    )
    assert status["current_stream_url"] == f"http://127.0.0.1:{port}/tv/demo/1.ts"
    assert deleted.stdout == "deleted 1 video(s) and 1 annotation file(s)\n"


def channel_names(database: Path) -> list[str]:
    with sqlite3.connect(database) as connection:
        rows = connection.execute("SELECT name FROM channels_admin_channel ORDER BY position")
        return [name for (name,) in rows]


def test_a_reload_killed_half_way_leaves_the_old_list(tmp_path: Path) -> None:
    playlist = tmp_path / "playlist.m3u"
    playlist.write_text(
        "#EXTM3U\n#EXTINF:-1,Old one\nhttp://old/1.ts\n#EXTINF:-1,Old two\nhttp://old/2.ts\n"
    )
    env = project_env(tmp_path, CHANNELS_PLAYLIST_PATH=str(playlist))
    migrated(env)
    assert manage("reload_playlist", env=env).returncode == 0
    database = tmp_path / "db.sqlite3"
    before = channel_names(database)
    # a list long enough that writing it takes a while
    playlist.write_text(
        "#EXTM3U\n" + "".join(f"#EXTINF:-1,New {n}\nhttp://new/{n}.ts\n" for n in range(300_000))
    )
    wal = tmp_path / "db.sqlite3-wal"
    baseline = wal.stat().st_size if wal.exists() else 0

    reload = subprocess.Popen(
        [sys.executable, "manage.py", "reload_playlist"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # killed once its transaction has written part of the new list
    deadline = time.monotonic() + 60
    while (wal.stat().st_size if wal.exists() else 0) < baseline + 4 * 1024 * 1024:
        assert reload.poll() is None, "the reload ended before it could be killed"
        assert time.monotonic() < deadline, "the reload wrote nothing within 60 s"
        time.sleep(0.01)
    reload.send_signal(signal.SIGKILL)
    reload.wait(timeout=10)

    assert before == ["Old one", "Old two", "Test pattern 1", "Test pattern 2"]  # demo after
    assert channel_names(database) == before


START_SESSION = "mutation($path: String!) { startSession(input: {path: $path}) { sessionId } }"
ADD_POINTS = """mutation($input: AddPointsInput!) {
  addPoints(input: $input) { frameIndex }
}"""
KEEP_WORK = {"X-Keep-Work": "1"}


def annotator(server: str) -> requests.Session:
    """A browser's session with the annotator: its cookie owns the work kept for it."""
    http = requests.Session()
    assert http.get(f"{server}/annotate/", timeout=30).status_code == 200
    return http


def started_session(http: requests.Session, server: str, path: str) -> str:
    """A session of the annotator's on the video, which keeps the owner's work."""
    started = http.post(
        f"{server}/graphql",
        json={"query": START_SESSION, "variables": {"path": path}},
        headers=KEEP_WORK,
        timeout=60,
    ).json()
    return started["data"]["startSession"]["sessionId"]


def clicked_session(http: requests.Session, server: str, path: str, point: list[float]) -> str:
    session_id = started_session(http, server, path)
    clicks = {
        "sessionId": session_id,
        "frameIndex": 0,
        "objectId": 1,
        "points": [point],
        "labels": [1],
        "clearOldPoints": True,
    }
    answer = http.post(
        f"{server}/graphql",
        json={"query": ADD_POINTS, "variables": {"input": clicks}},
        headers=KEEP_WORK,
        timeout=60,
    ).json()
    assert answer == {"data": {"addPoints": {"frameIndex": 0}}}
    return session_id


def job_started(http: requests.Session, server: str, session_id: str) -> dict:
    answer = http.post(
        f"{server}/sessions/{session_id}/propagation",
        json={"start_frame_index": 0, "direction": "forward"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["job"]


def job_now(http: requests.Session, server: str, job_id: int) -> dict:
    jobs = http.get(f"{server}/propagations", timeout=10).json()["jobs"]
    return next(job for job in jobs if job["id"] == job_id)


def job_until(http: requests.Session, server: str, job_id: int, done, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while not done(job := job_now(http, server, job_id)):
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
    return job


def exported(http: requests.Session, server: str, path: str) -> dict:
    """The owner's work on the video, as a new session of its exports it."""
    session_id = started_session(http, server, path)
    return http.get(f"{server}/annotations/{session_id}.json", timeout=60).json()


def test_a_propagation_job_killed_with_its_server_is_taken_up_and_ends_as_if_never_killed(
    tmp_path: Path,
) -> None:
    # given a video of 72 frames, and an owner's run of a propagation job through it
    port = free_port()
    env = {
        "PROPAGATION_JOB_LEASE_SEC": "2",
        "PROPAGATION_JOB_CARRY_FRAMES": "16",  # the job is taken up from its carry at 16 or more
        "SEGMENTATION_ENGINE": "classic",
        "SEGMENTATION_ENGINE_OPTIONS": "work_size=240",  # below the video's 320: as on most videos
    }
    clip = write_mp4(make_video(72), tmp_path / "clip.mp4").read_bytes()
    point = [90 / 319, 96 / 191]  # the disc's centre on frame 0
    with running_server(tmp_path, port=port, **env) as server:
        first = annotator(server)
        path = upload(first, server, UPLOAD, "clip.mp4", clip)["data"]["uploadVideo"]["path"]
        session_id = clicked_session(first, server, path, point)
        job = job_started(first, server, session_id)
        assert (
            job_until(first, server, job["id"], lambda job: job["status"] != "running")["status"]
            == "done"
        )
        never_killed = exported(first, server, path)

        # when another owner's same work is killed with the server a third of the way
        second = annotator(server)
        session_id = clicked_session(second, server, path, point)
        job = job_started(second, server, session_id)
        seen = job_until(second, server, job["id"], lambda job: job["done"] >= 24)
        os.kill(server_pid(server), signal.SIGKILL)

    # then every frame it was seen to have done is stored
    with sqlite3.connect(tmp_path / "db.sqlite3") as database:
        stored = database.execute(
            "SELECT count(DISTINCT frame_index) FROM segmentation_workmask WHERE work_id = "
            "(SELECT work_id FROM segmentation_propagationjob WHERE id = ?)",
            (job["id"],),
        ).fetchone()[0]
    assert stored >= seen["done"] >= 24

    # and once the server is back, the job is taken up and finishes
    with running_server(tmp_path, port=port, log_name="restarted.log", **env) as server:
        ended = job_until(second, server, job["id"], lambda job: job["status"] != "running")
        assert (ended["status"], ended["done"], ended["frames"]) == ("done", 72, 72)
        # with the owner's work as the run that was never killed made it, to the bit
        assert exported(second, server, path) == never_killed
    # taken up from what the engine carried after a multiple of 16 frames, not from frame 0
    taken_up = re.search(
        rf"propagation job {job['id']} goes on from its carry after (\d+) frames \((\d+) were",
        (tmp_path / "restarted.log").read_text(),
    )
    carried, stored_then = int(taken_up[1]), int(taken_up[2])
    assert (carried % 16, stored_then - carried < 16) == (0, True)
