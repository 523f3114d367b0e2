"""Annotation files against the real server, as a hostile client sends them (issue 47, findings
6, 7 and two of 8): the import priced as the clicks it replays, held to one GraphQL request's
bounds and stopped by the session's engine budget; the exports charged, capped before they are
parsed, and stopped when their client hangs up; object IDs within GraphQL's Int; deep JSON
refused with a code and one log line."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
import requests

from segmentation.rle import rle_encode
from tests.conftest import free_port, running_server, server_pid

VIDEO = "gallery/default.mp4"
HEIGHT, WIDTH = 480, 854  # the drawn default video's
EMPTY = rle_encode(np.zeros((HEIGHT, WIDTH), bool))
SPOTS = np.random.default_rng(47)


def clicks(count: int) -> dict:
    points = SPOTS.uniform(0.2, 0.8, size=(count, 2)).round(4).tolist()
    return {"points": points, "labels": [1] * count}


def annotation_file(frames: dict[int, list[dict]]) -> dict:
    """``{frame_index: [object, ...]}``, each object ``{"object_id", ...clicks}`` (an empty mask
    beside them, as an export lists a clicked object)."""
    return {
        "video": VIDEO,
        "frames": [
            {"frame_index": index, "objects": [{"mask": EMPTY, **item} for item in objects]}
            for index, objects in frames.items()
        ],
    }


def graphql(server: str, query: str, address: str, **variables: object) -> requests.Response:
    return requests.post(
        f"{server}/graphql",
        json={"query": query, "variables": variables},
        headers={"X-Forwarded-For": address},
        timeout=60,
    )


def start(server: str) -> str:
    answer = graphql(
        server,
        f'mutation {{ startSession(input: {{path: "{VIDEO}"}}) {{ sessionId }} }}',
        "10.0.0.1",
    )
    return answer.json()["data"]["startSession"]["sessionId"]


def post(server: str, path: str, body: bytes | dict, address: str) -> requests.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return requests.post(
        f"{server}{path}",
        data=data,
        headers={"Content-Type": "application/json", "X-Forwarded-For": address},
        timeout=120,
    )


def exported(server: str, session_id: str) -> dict:
    return requests.get(f"{server}/annotations/{session_id}.json", timeout=60).json()


def one_unit_more(server: str, address: str) -> requests.Response:
    """A mutation that costs 1: refused once the client has spent all of its limit."""
    return graphql(server, "mutation { createDeletionId }", address)


# An import of 3 prompts (2 clicks of 1 point on frame 0, 1 of 2 points on frame 5), under 4 KB:
# reading it 1 + 1, replaying it 9 + 9 + 13 + 2 frames of 8.
SMALL_IMPORT = annotation_file(
    {
        0: [{"object_id": 1, **clicks(1)}, {"object_id": 2, **clicks(1)}],
        5: [{"object_id": 1, **clicks(2)}],
    }
)
SMALL_IMPORT_COST = (1 + 1) + (9 + 9 + 13) + 2 * 8  # 49
# An export of 46 frames, one empty mask each, in 4 to 8 KB: reading it 1 + 2, a frame 1 each.
EXPORT_FILE = annotation_file({i: [{"object_id": 1}] for i in range(46)})
EXPORT_COST = (1 + 2) + 46  # 49


@pytest.fixture(scope="module")
def server(default_video_var: Path):
    with running_server(
        default_video_var, RATE_LIMIT_COST=f"{SMALL_IMPORT_COST}/h", MAX_ANNOTATIONS_MB="1"
    ) as base_url:
        yield base_url


def test_an_import_is_charged_as_the_clicks_it_replays(server):
    assert len(json.dumps(SMALL_IMPORT)) < 4096
    session_id = start(server)

    answer = post(server, f"/sessions/{session_id}/annotations", SMALL_IMPORT, "192.0.2.1")

    assert answer.status_code == 200
    assert [frame["frame_index"] for frame in answer.json()["frames"]] == [0, 5]
    # exactly the whole limit spent: one unit more is refused
    assert one_unit_more(server, "192.0.2.1").status_code == 429


def test_the_findings_import_is_refused_as_graphql_refuses_its_clicks(server):
    # given a session with a click, and the finding's file: 30 frames x 10 objects, a click each
    session_id = start(server)
    post(
        server,
        f"/sessions/{session_id}/annotations",
        annotation_file({3: [{"object_id": 4, **clicks(1)}]}),
        "192.0.2.2",
    )
    before = exported(server, session_id)
    attack = annotation_file(
        {f: [{"object_id": o, **clicks(1)} for o in range(1, 11)] for f in range(30)}
    )

    answer = post(server, f"/sessions/{session_id}/annotations", attack, "192.0.2.3")

    assert (answer.status_code, answer.json()) == (
        400,
        {
            "error": "the import would replay 300 prompts (an object's clicks or mask on a "
            "frame, each an addPoints); at most 10, as one request's root fields",
            "code": "QUERY_TOO_COMPLEX",
        },
    )
    assert exported(server, session_id) == before


def test_an_import_over_the_cost_of_one_request_is_refused(server):
    session_id = start(server)
    dear = annotation_file({f: [{"object_id": 1, **clicks(2)}] for f in range(10)})

    answer = post(server, f"/sessions/{session_id}/annotations", dear, "192.0.2.4")

    assert (answer.status_code, answer.json()) == (
        400,
        {
            "error": "the import would cost the engine 210, as the addPoints it replays; at "
            "most 100 (each root field 1, each engine call 4 more, each point 4, each frame 8)",
            "code": "QUERY_TOO_COMPLEX",
        },
    )
    assert exported(server, session_id) == {"video": VIDEO, "frames": []}


def test_object_ids_past_graphqls_int_are_refused(server):
    session_id = start(server)
    file = annotation_file({0: [{"object_id": 2**31, **clicks(1)}]})

    answer = post(server, f"/sessions/{session_id}/annotations", file, "192.0.2.5")

    assert (answer.status_code, answer.json()) == (
        400,
        {
            "error": "frames[0].objects[0].object_id must be an integer within 0..2147483647 "
            "(GraphQL's Int), got 2147483648",
            "code": "BAD_USER_INPUT",
        },
    )
    assert exported(server, session_id) == {"video": VIDEO, "frames": []}


def test_an_export_is_charged_by_the_file_and_its_frames(server):
    assert 4096 < len(json.dumps(EXPORT_FILE)) <= 8192
    assert EXPORT_COST == SMALL_IMPORT_COST

    answer = post(server, "/annotations/yolo.zip", EXPORT_FILE, "192.0.2.6")

    assert answer.status_code == 200
    assert one_unit_more(server, "192.0.2.6").status_code == 429


@pytest.mark.parametrize("path", ["/annotations/coco.json", "/annotations/masks.zip"])
def test_an_export_over_the_cap_is_refused_before_it_is_parsed(server, path):
    body = b"{}" * (2**19) + b" "  # a byte over 1 MB

    answer = post(server, path, body, "192.0.2.7")

    assert (answer.status_code, answer.json()) == (
        413,
        {
            "error": "the annotation file is 1.0 MB, over the limit of 1.0 MB (MAX_ANNOTATIONS_MB)",
            "code": "UPLOAD_TOO_LARGE",
        },
    )


def test_a_file_of_too_many_values_is_refused_before_it_is_parsed(server):
    answer = post(server, "/annotations/coco.json", b"[" * 600_000, "192.0.2.8")

    assert (answer.status_code, answer.json()) == (
        400,
        {
            "error": "the annotation file holds up to 600001 JSON values; an annotation file "
            "holds at most 500000",
            "code": "BAD_USER_INPUT",
        },
    )


def log_lines(server_log: Path, text: str) -> list[str]:
    return [line for line in server_log.read_text().splitlines() if text in line]


def test_deep_json_is_refused_with_a_code_and_one_log_line(server, default_video_var: Path):
    deep = b"[" * 5000 + b"]" * 5000
    log = default_video_var / "daphne.log"
    operations = {"query": "mutation($file: Upload!) { uploadAnnotations(file: $file) }"}

    uploaded = requests.post(
        f"{server}/graphql",
        data={"operations": json.dumps(operations | {"variables": {"file": None}}),
              "map": json.dumps({"0": ["variables.file"]})},
        files={"0": ("deep.json", deep, "application/json")},
        headers={"X-Forwarded-For": "192.0.2.9"},
        timeout=60,
    )  # fmt: skip
    imported = post(server, f"/sessions/{start(server)}/annotations", deep, "192.0.2.9")

    assert uploaded.json()["errors"] == [
        {
            "message": "the annotation file deep.json nests JSON too deeply to be an "
            "annotation file",
            "locations": [{"line": 1, "column": 28}],
            "path": ["uploadAnnotations"],
            "extensions": {"code": "BAD_USER_INPUT"},
        }
    ]
    assert (imported.status_code, imported.json()) == (
        400,
        {
            "error": "the annotation file nests JSON too deeply to be an annotation file",
            "code": "BAD_USER_INPUT",
        },
    )
    assert len(log_lines(log, "deep.json refused: JSON nested too deeply")) == 1
    assert len(log_lines(log, "Traceback")) == 0


# ---- the engine budget, and hang-ups


@pytest.fixture(scope="module")
def budget_server(default_video_var: Path):
    # a burst of one engine-second at a hundredth of a core, and one request's bounds and the
    # client's limit lifted, so that an import long enough to meet the budget is let through
    with running_server(
        default_video_var,
        port=free_port(),
        log_name="budget.log",
        RATE_LIMIT_COST="0",
        SESSION_ENGINE_BURST_SEC="1",
        SESSION_ENGINE_SHARE_PERCENT="1",
        GRAPHQL_MAX_COST="100000",
        GRAPHQL_MAX_ROOT_FIELDS="1000",
    ) as base_url:
        yield base_url


def test_the_engine_budget_stops_an_import_between_frames_and_keeps_what_it_did(budget_server):
    # given a file whose frame 4 takes more than the session's burst (2 objects of 20 clicks,
    # some seconds), between a light frame before it and one after
    session_id = start(budget_server)
    heavy = [{"object_id": o, **clicks(20)} for o in range(1, 3)]
    file = annotation_file(
        {0: [{"object_id": 1, **clicks(1)}], 4: heavy, 9: [{"object_id": 1, **clicks(1)}]}
    )

    answer = post(budget_server, f"/sessions/{session_id}/annotations", file, "198.51.100.1")

    # then frames 0 and 4 are imported and kept, frame 9 is not, and the answer says so
    body = answer.json()
    wait = int(answer.headers["Retry-After"])
    assert answer.status_code == 429
    assert body["code"] == "RESOURCE_EXHAUSTED"
    assert body["error"] == (
        "the import stopped after 2 of the file's 3 frames: its frames up to 4 were imported "
        "and are kept, those from 9 on were not; this session used its engine time (a share "
        f"of 0.01 of a core, bursts of 1 s); try again in {wait} s"
    )
    assert (body["imported_frames"], body["remaining_frames"]) == ([0, 4], [9])
    kept = exported(budget_server, session_id)
    assert [frame["frame_index"] for frame in kept["frames"]] == [0, 4]
    assert [len(frame["objects"]) for frame in kept["frames"]] == [1, 2]
    assert [frame["frame_index"] for frame in body["frames"]] == [0, 4]
    # the answer's masks of those frames (every object's, as an import answers) are the kept ones
    for frame, answered in zip(kept["frames"], body["frames"], strict=True):
        masks = {item["object_id"]: item["mask"] for item in answered["objects"]}
        assert [masks[item["object_id"]] for item in frame["objects"]] == [
            item["mask"] for item in frame["objects"]
        ]


def isolated_pixels() -> dict:
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[::2, ::2] = True  # 102,480 parts of one pixel each
    return rle_encode(mask)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_export_stops_when_its_client_hangs_up(budget_server, default_video_var: Path):
    # given YOLO labels asked for 8 frames of masks of isolated pixels (seconds of work each)
    mask = isolated_pixels()
    file = {
        "video": VIDEO,
        "frames": [
            {"frame_index": i, "objects": [{"object_id": 1, "mask": mask}]} for i in range(8)
        ],
    }
    body = json.dumps(file).encode()
    address = urlsplit(budget_server)
    pid = server_pid(budget_server)
    log = default_video_var / "budget.log"

    # when the client sends it, and hangs up once the conversion has begun
    with socket.create_connection((address.hostname, address.port)) as connection:
        connection.sendall(
            b"POST /annotations/yolo.zip HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
            + body
        )
        time.sleep(3)

    # then the server stops converting within a mask, and says so
    deadline = time.monotonic() + 10
    while not log_lines(log, "/annotations/yolo.zip stopped: the client went away"):
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.1)
    before = cpu_seconds(pid)
    time.sleep(2)
    assert cpu_seconds(pid) - before < 0.5
