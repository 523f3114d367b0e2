"""What the server keeps survives a restart, and a playlist reload killed half-way loses nothing."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.conftest import ROOT, free_port, manage, migrated, project_env, running_server
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
