"""Many sessions at once on the real server: clicks, propagations, cancel storms, clients that hang
up mid-stream and sessions left to expire (expiring while the others work). The server stays up,
and afterwards every place under the session cap is free again (no session leaked)."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest
import requests

from tests.conftest import running_server
from tests.segmentation.synthetic import make_video, write_mp4

CLIENTS = 24
IDLE_TIMEOUT_SEC = 12  # well above the time a request may queue behind the others
START = "mutation($p: String!) { startSession(input: {path: $p}) { sessionId } }"
ADD = """mutation($s: String!, $x: Float!) {
  addPoints(input: {sessionId: $s, frameIndex: 0, objectId: 1, clearOldPoints: true,
                    labels: [1], points: [[$x, 0.5]]}) { frameIndex }
}"""
CANCEL = "mutation($s: String!) { cancelPropagateInVideo(input: {sessionId: $s}) { success } }"
CLOSE = "mutation($s: String!) { closeSession(input: {sessionId: $s}) { success } }"


@pytest.fixture(scope="module")
def loaded_server(tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("load-var")
    library = var_dir / "library"
    library.mkdir()
    write_mp4(make_video(frame_count=12), library / "shapes.mp4")
    # every client comes from 127.0.0.1: no per-client cap
    env = {
        "MAX_SESSIONS": str(CLIENTS),
        "MAX_SESSIONS_PER_CLIENT": "0",
        "SESSION_IDLE_TIMEOUT_SEC": str(IDLE_TIMEOUT_SEC),
        # the server imports it into the gallery when first asked for its default video, as
        # `manage.py import_videos` would (the same import, without a Django process of its own)
        "DEFAULT_VIDEO_PATH": str(library / "shapes.mp4"),
    }
    with running_server(var_dir, **env) as server:
        imported = requests.get(
            f"{server}/graphql", params={"query": "{ defaultVideo { path } }"}, timeout=60
        )
        assert imported.json() == {"data": {"defaultVideo": {"path": "gallery/shapes.mp4"}}}
        yield server


def gql(http: requests.Session, server: str, query: str, **variables: object) -> dict:
    return http.post(
        f"{server}/graphql", json={"query": query, "variables": variables}, timeout=60
    ).json()


class Expiries:
    """The clients that leave their sessions to expire go first: once each has propagated, it
    waits out the idle timeout while the others click, propagate, cancel and hang up."""

    def __init__(self, count: int) -> None:
        self._left = count
        self._lock = threading.Lock()
        self.streamed = threading.Event()

    def one_streamed(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self.streamed.set()


def client_run(server: str, role: str, n: int, expiries: Expiries) -> str:
    """One client's visit; what it saw at the end, in a word."""
    if role != "expires":
        assert expiries.streamed.wait(timeout=120)
    http = requests.Session()
    session_id = gql(http, server, START, p="gallery/shapes.mp4")["data"]["startSession"]
    session_id = session_id["sessionId"]
    for click in range(2):
        answer = gql(http, server, ADD, s=session_id, x=0.2 + 0.1 * ((n + click) % 6))
        assert answer == {"data": {"addPoints": {"frameIndex": 0}}}, answer
    with http.post(
        f"{server}/propagate_in_video", json={"session_id": session_id}, stream=True, timeout=60
    ) as stream:
        parts = 0
        for chunk in stream.iter_content(chunk_size=None):
            parts += chunk.count(b"--frame\r\n")
            if role == "cancels" and parts >= 2:
                gql(http, server, CANCEL, s=session_id)  # the stream then ends by itself
            if role == "hangs up" and parts >= 2:
                break  # closing the response hangs up mid-stream
    if role == "expires":
        expiries.one_streamed()
        time.sleep(IDLE_TIMEOUT_SEC + 1)
        answer = gql(http, server, ADD, s=session_id, x=0.5)
        return answer["errors"][0]["extensions"]["code"]
    closed = gql(http, server, CLOSE, s=session_id)["data"]["closeSession"]["success"]
    return "closed" if closed else "not closed"


def test_many_sessions_at_once_leak_nothing(loaded_server: str) -> None:
    roles = ["propagates", "cancels", "hangs up", "expires"] * (CLIENTS // 4)
    expiries = Expiries(roles.count("expires"))

    with concurrent.futures.ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        outcomes = list(
            pool.map(
                client_run,
                [loaded_server] * CLIENTS,
                roles,
                range(CLIENTS),
                [expiries] * CLIENTS,
            )
        )

    expected = {"propagates": "closed", "cancels": "closed", "hangs up": "closed"}
    expected["expires"] = "SESSION_NOT_FOUND"
    assert outcomes == [expected[role] for role in roles]
    assert requests.get(f"{loaded_server}/healthz", timeout=5).json()["status"] == "ok"
    # every place under the cap is free again
    http = requests.Session()
    started = [gql(http, loaded_server, START, p="gallery/shapes.mp4") for _ in range(CLIENTS)]
    refused = gql(http, loaded_server, START, p="gallery/shapes.mp4")
    assert all("errors" not in answer for answer in started)
    assert refused["errors"][0]["extensions"] == {"code": "TOO_MANY_SESSIONS"}
    for answer in started:
        gql(http, loaded_server, CLOSE, s=answer["data"]["startSession"]["sessionId"])
