"""Uploads prepared in the background, driven as the gallery drives them on the real server:
``POST /uploads`` answers at once, ``GET /uploads`` follows the preparation to its video, a
cancel or a failure leaves no file, a client's flood is refused, and a server killed in the
middle takes the upload up again when it comes back."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, manage, project_env, running_server, server_pid
from tests.segmentation.conftest import noise_video
from tests.segmentation.numbered_video import write_numbered
from tests.segmentation.test_upload_limits import growing_video

NODE_QUERY = "query($id: GlobalID!) { node(id: $id) { ... on Video { path frameCount fps } } }"


def post(server: str, session: requests.Session, path: Path, name: str | None = None):
    with path.open("rb") as file:
        return session.post(
            f"{server}/uploads", files={"file": (name or path.name, file, "video/mp4")}, timeout=60
        )


def until(session: requests.Session, url: str, done, *, timeout: float = 60) -> dict:
    """The JSON at ``url`` once ``done`` says so of it."""
    deadline = time.monotonic() + timeout
    while True:
        answer = session.get(url, timeout=10).json()
        if done(answer):
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def var(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("preparations") / "var"


@pytest.fixture(scope="module")
def server(var: Path) -> Iterator[str]:
    """One server for the module's tests: each leaves no upload of its client's preparing
    (UPLOADS_PER_CLIENT=1), and the ones that look at the media folder compare it with what it
    held when they began."""
    with running_server(var, UPLOADS_PER_CLIENT="1", MAX_UPLOAD_PIXELS=str(320 * 240)) as url:
        yield url


def test_an_upload_is_answered_at_once_and_followed_to_its_video(
    server: str, var: Path, tmp_path: Path
) -> None:
    # given a constant-rate 24 fps MP4 of 2,000 frames
    source = write_numbered(tmp_path / "long.mp4", [i / 24 for i in range(2000)])
    browser = requests.Session()

    # when it is uploaded
    answer = post(server, browser, source, "my long clip.mp4")

    # then it is queued at once, then ready, a video of exactly its frames
    assert answer.status_code == 202
    upload = answer.json()
    assert {key: upload[key] for key in ("name", "state", "failure", "video")} == {
        "name": "my long clip.mp4",
        "state": "queued",
        "failure": None,
        "video": None,
    }
    ready = until(browser, f"{server}/uploads/{upload['id']}", lambda u: u["state"] == "ready")
    assert (ready["framesDone"], ready["framesTotal"], ready["progress"]) == (2000, 2000, 1.0)
    node = browser.post(
        f"{server}/graphql",
        json={
            "query": NODE_QUERY,
            "variables": {"id": ready["video"]},
        },
        timeout=10,
    ).json()["data"]["node"]
    assert (node["frameCount"], node["fps"]) == (2000, 24.0)
    # the gallery shows no unfinished upload; of the upload, only the video and its poster stay
    assert browser.get(f"{server}/uploads", timeout=10).json() == {"uploads": []}
    sha = node["path"].removeprefix("uploads/").removesuffix(".mp4")
    assert files_under(var / "media" / "uploads") == [f"{sha}.mp4"]
    assert (var / "media" / "posters" / f"{sha}.jpg").exists()
    # and another browser does not see it
    assert requests.get(f"{server}/uploads/{upload['id']}", timeout=10).json() == {
        "error": f"no upload {upload['id']} of yours",
        "code": "UPLOAD_NOT_FOUND",
    }


def gallery(server: str) -> list[str]:
    edges = requests.post(
        f"{server}/graphql", json={"query": "{ videos { edges { node { path } } } }"}, timeout=10
    ).json()["data"]["videos"]["edges"]
    return [edge["node"]["path"] for edge in edges]


def test_a_cancel_stops_the_preparation_and_keeps_nothing(
    server: str, var: Path, slow_video: Path
) -> None:
    browser = requests.Session()
    before = files_under(var / "media")
    videos = gallery(server)
    upload = post(server, browser, slow_video).json()
    preparing = until(browser, f"{server}/uploads", lambda a: a["uploads"][0]["framesDone"] > 0)[
        "uploads"
    ][0]
    assert preparing["state"] == "preparing"
    assert 0 < preparing["progress"] < 1
    assert preparing["framesTotal"] == 1440  # a minute at 24 fps

    cancelled = browser.delete(f"{server}/uploads/{upload['id']}", timeout=10)

    assert cancelled.status_code == 204
    assert browser.get(f"{server}/uploads", timeout=10).json() == {"uploads": []}
    deadline = time.monotonic() + 10
    while files_under(var / "media") != before:
        assert time.monotonic() < deadline, files_under(var / "media")
        time.sleep(0.1)
    assert gallery(server) == videos


def test_deleting_a_clients_data_stops_its_uploads_and_keeps_nothing_of_them(
    server: str, var: Path, slow_video: Path, tmp_path: Path
) -> None:
    # given a client with a deletion ID, a failed upload, and one being prepared
    browser = requests.Session()
    deletion_id = browser.post(
        f"{server}/graphql", json={"query": "mutation { createDeletionId }"}, timeout=10
    ).json()["data"]["createDeletionId"]
    before = files_under(var / "media")
    videos = gallery(server)
    grows = growing_video(tmp_path / "grows.ts", first=(320, 240), then=(640, 480))
    post(server, browser, grows)
    until(browser, f"{server}/uploads", lambda a: a["uploads"][0]["state"] == "failed")
    post(server, browser, slow_video)
    until(
        browser,
        f"{server}/uploads",
        lambda a: any(u["state"] == "preparing" and u["framesDone"] > 0 for u in a["uploads"]),
    )

    # when the operator deletes its data
    deleted = manage("delete_user_data", deletion_id, env=project_env(var))

    # then no upload of its is left, the preparation stops and leaves no file, and it never
    # becomes a video
    assert (deleted.returncode, deleted.stdout) == (
        0,
        "deleted 0 video(s) and 0 annotation file(s)\n",
    )
    assert browser.get(f"{server}/uploads", timeout=10).json() == {"uploads": []}
    deadline = time.monotonic() + 10
    while files_under(var / "media") != before:
        assert time.monotonic() < deadline, files_under(var / "media")
        time.sleep(0.1)
    assert gallery(server) == videos


def test_a_failure_says_why_keeps_no_file_and_can_be_dismissed(
    server: str, var: Path, tmp_path: Path
) -> None:
    # given a file whose header passes and whose frames grow past the limit midway
    grows = growing_video(tmp_path / "grows.ts", first=(320, 240), then=(640, 480))
    browser = requests.Session()
    before = files_under(var / "media")

    upload = post(server, browser, grows).json()
    failed = until(browser, f"{server}/uploads", lambda a: a["uploads"][0]["state"] == "failed")

    assert failed["uploads"][0]["failure"] == (
        "grows.ts has a frame of 640x480 where its header says 320x240: pictures of at most "
        "76,800 pixels are taken"
    )
    assert files_under(var / "media") == before
    assert browser.delete(f"{server}/uploads/{upload['id']}", timeout=10).status_code == 204
    assert browser.get(f"{server}/uploads", timeout=10).json() == {"uploads": []}


def test_a_clients_flood_is_refused_past_its_share(
    server: str, var: Path, slow_video: Path, tmp_path: Path
) -> None:
    # given one upload of this client's being prepared (UPLOADS_PER_CLIENT=1)
    browser = requests.Session()
    first = post(server, browser, slow_video).json()

    def others() -> list[str]:  # the first one's files come and go as it is prepared
        return [name for name in files_under(var / "media") if first["id"] not in name]

    before = others()

    # when it sends more, from this browser or another
    refused = [post(server, session, slow_video) for session in (browser, requests.Session())]

    # then they are refused at once, and nothing of theirs is kept
    for answer in refused:
        assert answer.status_code == 503
        assert answer.headers["Retry-After"] == "10"
        assert answer.json() == {
            "error": "1 of your uploads are being prepared, as many as one client may have at "
            "once; try again in 10 s, or cancel one",
            "code": "SERVER_BUSY",
        }
    assert others() == before
    assert browser.delete(f"{server}/uploads/{first['id']}", timeout=10).status_code == 204


@pytest.fixture(scope="module")
def slowish_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twenty seconds of the slow video's noise (500 frames at 25 fps): transcoded in a
    second or two, long enough for a server to be killed in the middle, short enough to be
    prepared again whole."""
    return noise_video(tmp_path_factory.mktemp("slowish") / "noise.mp4", frames=500)


def test_a_preparation_the_server_was_killed_in_is_taken_up_when_it_comes_back(
    tmp_path: Path, slowish_video: Path
) -> None:
    var = tmp_path / "var"
    browser = requests.Session()
    settings = {"PREPARATION_LEASE_SEC": "1"}
    with running_server(var, port=free_port(), **settings) as server:
        upload = post(server, browser, slowish_video).json()
        until(browser, f"{server}/uploads", lambda a: a["uploads"][0]["framesDone"] > 0)
        os.kill(server_pid(server), signal.SIGKILL)
        # its child goes with it, leaving its partial file
        time.sleep(1)
    # (killed in the middle: the preparation was not done)
    assert files_under(var / "media" / "uploads" / ".preparing") != []

    with running_server(var, log_name="restarted.log", **settings) as server:
        ready = until(
            browser,
            f"{server}/uploads/{upload['id']}",
            lambda u: u["state"] in ("ready", "failed"),
            timeout=90,
        )

        assert (ready["state"], ready["framesDone"]) == ("ready", 480)
        assert files_under(var / "media" / "uploads" / ".preparing") == []
    assert f"taking up the upload {upload['id']} (preparing)" in (var / "restarted.log").read_text()
