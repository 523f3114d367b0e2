"""The SAM 2 demo frontend's conversation with the server, replayed against the real ASGI server:
its operations (named as the frontend names them, with the fields it asks for), sent as its Relay
environment sends them (JSON, or a multipart request for uploads), cross-origin with credentials,
and its propagation stream read by its parser's rules."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests

from segmentation.evaluation.metrics import region_similarity
from segmentation.rle import rle_decode
from tests.conftest import project_env, running_server, var_copied
from tests.segmentation.synthetic import make_video, write_mp4
from tests.segmentation.test_propagation_stream import parts
from tests.segmentation.test_workers import worker_running, worker_settings
from tests.system.test_scale_out import needs_redis

ORIGIN = "http://localhost:7262"
VIDEO_FIELDS = "id path posterPath url posterUrl height width"
MASKS = "frameIndex rleMaskList { objectId rleMask { counts size } }"

OPERATIONS = {
    "DemoPageQuery": f"query DemoPageQuery {{ defaultVideo {{ {VIDEO_FIELDS} }} }}",
    "DemoVideoGalleryQuery": (
        f"query DemoVideoGalleryQuery {{ videos {{ edges {{ node {{ {VIDEO_FIELDS} }} }} }} }}"
    ),
    "useUploadVideoMutation": (
        "mutation useUploadVideoMutation($file: Upload!) "
        f"{{ uploadVideo(file: $file) {{ {VIDEO_FIELDS} }} }}"
    ),
    "SAM2ModelStartSessionMutation": (
        "mutation SAM2ModelStartSessionMutation($input: StartSessionInput!) "
        "{ startSession(input: $input) { sessionId } }"
    ),
    "SAM2ModelAddNewPointsMutation": (
        "mutation SAM2ModelAddNewPointsMutation($input: AddPointsInput!) "
        f"{{ addPoints(input: $input) {{ {MASKS} }} }}"
    ),
    "SAM2ModelClearPointsInFrameMutation": (
        "mutation SAM2ModelClearPointsInFrameMutation($input: ClearPointsInFrameInput!) "
        f"{{ clearPointsInFrame(input: $input) {{ {MASKS} }} }}"
    ),
    "SAM2ModelRemoveObjectMutation": (
        "mutation SAM2ModelRemoveObjectMutation($input: RemoveObjectInput!) "
        f"{{ removeObject(input: $input) {{ {MASKS} }} }}"
    ),
    "SAM2ModelCancelPropagateInVideoMutation": (
        "mutation SAM2ModelCancelPropagateInVideoMutation($input: CancelPropagateInVideoInput!) "
        "{ cancelPropagateInVideo(input: $input) { success } }"
    ),
    "SAM2ModelClearPointsInVideoMutation": (
        "mutation SAM2ModelClearPointsInVideoMutation($input: ClearPointsInVideoInput!) "
        "{ clearPointsInVideo(input: $input) { success } }"
    ),
    "SAM2ModelCloseSessionMutation": (
        "mutation SAM2ModelCloseSessionMutation($input: CloseSessionInput!) "
        "{ closeSession(input: $input) { success } }"
    ),
}


@pytest.fixture(scope="module", params=["embedded", pytest.param("workers", marks=needs_redis)])
def server(
    request, _default_video_var: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The server as `make run` starts it (its var folder migrated and holding the default
    video); or a web process with the engine in an inference worker (docs/deploy.md)."""
    var = var_copied(_default_video_var, tmp_path_factory.mktemp("frontend") / "var")
    extra = worker_settings() if request.param == "workers" else {}
    env = project_env(var, **extra)
    with contextlib.ExitStack() as stack:
        if extra:
            stack.enter_context(worker_running(var, env, "replay"))
        yield stack.enter_context(running_server(var, **extra))


@pytest.fixture(scope="module")
def browser_session() -> requests.Session:
    session = requests.Session()
    session.headers["Origin"] = ORIGIN
    return session


def send(http: requests.Session, server: str, name: str, **variables: object) -> dict:
    response = http.post(
        f"{server}/graphql",
        json={"query": OPERATIONS[name], "variables": variables},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    # the frontend sends credentials: the answer must allow them for its origin
    assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert response.headers["Access-Control-Allow-Credentials"] == "true"
    result = response.json()
    assert "errors" not in result, result
    return result["data"]


def test_preflight_allows_the_frontend(server: str) -> None:
    response = requests.options(
        f"{server}/graphql",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
        timeout=10,
    )

    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert response.headers["Access-Control-Allow-Credentials"] == "true"


def test_the_whole_conversation(server: str, browser_session: requests.Session, tmp_path) -> None:
    http = browser_session
    default = send(http, server, "DemoPageQuery")["defaultVideo"]
    assert (default["path"], default["width"], default["height"]) == (
        "gallery/default.mp4",
        854,
        480,
    )
    assert requests.get(default["posterUrl"], timeout=10).headers["Content-Type"] == "image/jpeg"
    gallery = send(http, server, "DemoVideoGalleryQuery")["videos"]["edges"]
    assert [edge["node"] for edge in gallery] == [default]

    # upload, as Relay sends uploadables: operations, map, and the file part
    video = make_video(24)
    source = write_mp4(video, tmp_path / "upload.mp4")
    operations = {"query": OPERATIONS["useUploadVideoMutation"], "variables": {"file": None}}
    uploaded = http.post(
        f"{server}/graphql",
        files={
            "operations": (None, json.dumps(operations)),
            "map": (None, json.dumps({"1": ["variables.file"]})),
            "1": ("upload.mp4", source.read_bytes(), "video/mp4"),
        },
        timeout=60,
    ).json()["data"]["uploadVideo"]
    assert (uploaded["width"], uploaded["height"]) == (320, 192)
    assert uploaded["path"].startswith("uploads/")
    assert requests.get(uploaded["url"], timeout=10).content[4:8] == b"ftyp"

    started = send(http, server, "SAM2ModelStartSessionMutation", input={"path": uploaded["path"]})
    session_id = started["startSession"]["sessionId"]

    def points(frame: int, object_id: int) -> list[list[float]]:
        ys, xs = np.nonzero(video.masks[frame][object_id])
        return [[float(xs.mean()) / 320, float(ys.mean()) / 192]]

    added = send(
        http,
        server,
        "SAM2ModelAddNewPointsMutation",
        input={
            "sessionId": session_id,
            "frameIndex": 0,
            "objectId": 0,
            "labels": [1],
            "points": points(0, 1),
            "clearOldPoints": True,
        },
    )["addPoints"]
    assert added["frameIndex"] == 0
    assert [item["objectId"] for item in added["rleMaskList"]] == [0]
    mask = rle_decode(added["rleMaskList"][0]["rleMask"])
    assert region_similarity(mask, video.masks[0][1]) > 0.9

    cleared = send(
        http,
        server,
        "SAM2ModelClearPointsInFrameMutation",
        input={"sessionId": session_id, "frameIndex": 0, "objectId": 0},
    )["clearPointsInFrame"]
    assert not rle_decode(cleared["rleMaskList"][0]["rleMask"]).any()
    for object_id, truth_id in ((0, 1), (1, 2)):
        send(
            http,
            server,
            "SAM2ModelAddNewPointsMutation",
            input={
                "sessionId": session_id,
                "frameIndex": 0,
                "objectId": object_id,
                "labels": [1],
                "points": points(0, truth_id),
                "clearOldPoints": True,
            },
        )

    # the stream, as the frontend fetches it: JSON body, cross-origin
    with http.post(
        f"{server}/propagate_in_video",
        json={"session_id": session_id, "start_frame_index": 0},
        stream=True,
        timeout=60,
    ) as response:
        assert response.headers["Content-Type"].startswith("multipart/x-savi-stream;")
        assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
        frames = [json.loads(body) for _, body in parts(response)]
    assert [frame["frame_index"] for frame in frames] == list(range(24))
    last = {r["object_id"]: rle_decode(r["mask"]) for r in frames[-1]["results"]}
    assert region_similarity(last[0], video.masks[23][1]) > 0.85
    assert region_similarity(last[1], video.masks[23][2]) > 0.85

    assert send(
        http, server, "SAM2ModelCancelPropagateInVideoMutation", input={"sessionId": session_id}
    ) == {"cancelPropagateInVideo": {"success": True}}
    removed = send(
        http,
        server,
        "SAM2ModelRemoveObjectMutation",
        input={"sessionId": session_id, "objectId": 0},
    )["removeObject"]
    assert [(r["frameIndex"], [m["objectId"] for m in r["rleMaskList"]]) for r in removed] == [
        (0, [1])
    ]
    assert send(
        http, server, "SAM2ModelClearPointsInVideoMutation", input={"sessionId": session_id}
    ) == {"clearPointsInVideo": {"success": True}}
    assert send(http, server, "SAM2ModelCloseSessionMutation", input={"sessionId": session_id}) == {
        "closeSession": {"success": True}
    }
