"""``POST /propagate_in_video`` against the real ASGI server, read as the SAM 2 demo reads it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests

from segmentation.evaluation.metrics import region_similarity
from segmentation.rle import rle_decode
from tests.conftest import manage, migrated, project_env, running_server
from tests.segmentation.synthetic import HEIGHT, WIDTH, make_video, write_mp4

LONG_FRAMES = 240


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    var = tmp_path_factory.mktemp("stream-var")
    videos = tmp_path_factory.mktemp("stream-videos")
    write_mp4(make_video(12), videos / "short.mp4")
    write_mp4(make_video(LONG_FRAMES), videos / "long.mp4")
    env = project_env(var)
    migrated(env)
    imported = manage("import_videos", str(videos), env=env)
    assert imported.returncode == 0, imported.stderr
    # the module's sessions all come from 127.0.0.1, and some stay open: no per-client cap
    with running_server(var, MAX_SESSIONS_PER_CLIENT="0") as base_url:
        yield base_url


def graphql(server: str, query: str, **variables: object) -> dict:
    response = requests.post(
        f"{server}/graphql", json={"query": query, "variables": variables}, timeout=30
    )
    return response.json()


def start_session(server: str, path: str) -> str:
    result = graphql(
        server,
        "mutation($input: StartSessionInput!) { startSession(input: $input) { sessionId } }",
        input={"path": path},
    )
    return result["data"]["startSession"]["sessionId"]


def click_input(session_id: str, object_id: int, frame: int) -> dict:
    """``addPoints``'s input: one click at the centre of the drawn object on that frame."""
    ys, xs = np.nonzero(make_video(frame + 1).masks[frame][object_id])
    return {
        "sessionId": session_id,
        "frameIndex": frame,
        "clearOldPoints": True,
        "objectId": object_id,
        "labels": [1],
        "points": [[float(xs.mean()) / WIDTH, float(ys.mean()) / HEIGHT]],
    }


def click(server: str, session_id: str, object_id: int, frame: int) -> dict:
    return graphql(
        server,
        "mutation($input: AddPointsInput!) { addPoints(input: $input) { frameIndex } }",
        input=click_input(session_id, object_id, frame),
    )


def parts(response: requests.Response) -> Iterator[tuple[dict[str, str], bytes]]:
    """The parts of a multipart/x-savi-stream, parsed by the SAM 2 demo's rules: blank lines,
    then "--frame", header lines "Name: value", a blank line, Content-Length bytes of body."""
    boundary = b"--" + response.headers["Content-Type"].split("; boundary=", 1)[1].encode()
    buffer = b""
    chunks = response.iter_content(chunk_size=None)
    while True:
        while buffer.startswith(b"\r\n"):
            buffer = buffer[2:]
        if b"\r\n\r\n" not in buffer:
            chunk = next(chunks, None)
            if chunk is None:
                assert buffer == b"", "the stream ended mid-part"
                return
            buffer += chunk
            continue
        head, rest = buffer.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        assert lines[0] == boundary
        headers = dict(line.decode().split(": ", 1) for line in lines[1:])
        length = int(headers["Content-Length"])
        while len(rest) < length:
            rest += next(chunks)
        yield headers, rest[:length]
        buffer = rest[length:]


def propagate(
    server: str, session_id: str, start: int | None = None, **bounds: object
) -> requests.Response:
    """The stream from ``start``; ``bounds``: the body's ``direction``, ``end_frame_index``."""
    body = {"session_id": session_id} | ({} if start is None else {"start_frame_index": start})
    body |= bounds
    return requests.post(f"{server}/propagate_in_video", json=body, stream=True, timeout=60)


def test_stream_forward_then_backward_with_every_object(server: str) -> None:
    video = make_video(12)
    session_id = start_session(server, "gallery/short.mp4")
    click(server, session_id, 1, 4)
    click(server, session_id, 2, 4)

    with propagate(server, session_id, 4) as response:
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "multipart/x-savi-stream; boundary=frame"
        received = list(parts(response))

    order = []
    for headers, body in received:
        assert headers["Content-Type"] == "application/json; charset=utf-8"
        assert headers["Mask-Type"] == "RLE[]"
        assert headers["Frame-Total"] == "12"
        data = json.loads(body)
        assert headers["Frame-Current"] == str(data["frame_index"])
        order.append(data["frame_index"])
        assert [r["object_id"] for r in data["results"]] == [1, 2]
        for result in data["results"]:
            assert sorted(result["mask"]) == ["counts", "size"]
            mask = rle_decode(result["mask"])
            truth = video.masks[data["frame_index"]][result["object_id"]]
            assert region_similarity(mask, truth) > 0.85
    assert order == [4, 5, 6, 7, 8, 9, 10, 11, 3, 2, 1, 0]


def test_start_frame_defaults_to_zero(server: str) -> None:
    session_id = start_session(server, "gallery/short.mp4")
    click(server, session_id, 1, 0)

    with propagate(server, session_id) as response:
        frames = [int(headers["Frame-Current"]) for headers, _ in parts(response)]

    assert frames == list(range(12))


@pytest.fixture
def short_session(server: str) -> Iterator[str]:
    """A session on the short video, closed after the test (sessions are capped)."""
    session_id = start_session(server, "gallery/short.mp4")
    yield session_id
    graphql(
        server,
        "mutation($input: CloseSessionInput!) { closeSession(input: $input) { success } }",
        input={"sessionId": session_id},
    )


def test_forward_to_a_marked_end_streams_exactly_that_range(
    server: str, short_session: str
) -> None:
    video = make_video(12)
    click(server, short_session, 1, 4)

    with propagate(server, short_session, 4, direction="forward", end_frame_index=10) as response:
        assert response.status_code == 200
        received = [(headers, json.loads(body)) for headers, body in parts(response)]

    assert [data["frame_index"] for _, data in received] == [4, 5, 6, 7, 8, 9, 10]
    assert {headers["Frame-Total"] for headers, _ in received} == {"12"}
    for _, data in received:
        (result,) = data["results"]
        truth = video.masks[data["frame_index"]][1]
        assert region_similarity(rle_decode(result["mask"]), truth) > 0.85
    # the frames outside the range were not tracked: the export has the range's frames only
    export = requests.get(f"{server}/annotations/{short_session}.json", timeout=30).json()
    assert [frame["frame_index"] for frame in export["frames"]] == [4, 5, 6, 7, 8, 9, 10]


def test_backward_to_a_marked_end_streams_from_the_start_down_to_it(
    server: str, short_session: str
) -> None:
    click(server, short_session, 1, 8)

    with propagate(server, short_session, 8, direction="backward", end_frame_index=2) as response:
        order = [json.loads(body)["frame_index"] for _, body in parts(response)]

    assert order == [8, 7, 6, 5, 4, 3, 2]


@pytest.mark.parametrize(
    ("bounds", "order"),
    [
        ({"direction": "both"}, [4, 5, 6, 7, 8, 9, 10, 11, 3, 2, 1, 0]),
        ({"direction": "both", "end_frame_index": None}, [4, 5, 6, 7, 8, 9, 10, 11, 3, 2, 1, 0]),
        ({"direction": "forward"}, [4, 5, 6, 7, 8, 9, 10, 11]),
        ({"direction": "backward"}, [4, 3, 2, 1, 0]),
        # with both ways, the end's distance from the start bounds each (SAM 2's
        # max_frame_num_to_track): 2 frames past 4, forward then backward
        ({"direction": "both", "end_frame_index": 6}, [4, 5, 6, 3, 2]),
        ({"direction": "both", "end_frame_index": 1}, [4, 5, 6, 7, 3, 2, 1]),
        ({"direction": "forward", "end_frame_index": 4}, [4]),
    ],
)
def test_the_bounds_choose_the_frames_and_their_order(
    server: str, short_session: str, bounds: dict, order: list[int]
) -> None:
    click(server, short_session, 1, 4)

    with propagate(server, short_session, 4, **bounds) as response:
        assert [json.loads(body)["frame_index"] for _, body in parts(response)] == order


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        (
            {"direction": "forward", "end_frame_index": 12},
            "end frame index 12 is outside the video's frames 0..11",
        ),
        (
            {"direction": "both", "end_frame_index": -1},
            "end frame index -1 is outside the video's frames 0..11",
        ),
        (
            {"direction": "forward", "end_frame_index": 3},
            "end frame index 3 is before start frame index 4: "
            "a forward propagation ends at or after its start",
        ),
        (
            {"direction": "backward", "end_frame_index": 5},
            "end frame index 5 is after start frame index 4: "
            "a backward propagation ends at or before its start",
        ),
        (
            {"direction": "sideways"},
            'direction must be "both", "forward" or "backward", got \'sideways\'',
        ),
        (
            {"direction": 1},
            'direction must be "both", "forward" or "backward", got 1',
        ),
        ({"end_frame_index": "10"}, "end_frame_index must be an integer, got '10'"),
        ({"end_frame_index": 10.0}, "end_frame_index must be an integer, got 10.0"),
        ({"end_frame_index": True}, "end_frame_index must be an integer, got True"),
    ],
)
def test_bad_bounds_are_refused_and_nothing_runs(
    server: str, short_session: str, bounds: dict, message: str
) -> None:
    click(server, short_session, 1, 4)

    response = requests.post(
        f"{server}/propagate_in_video",
        json={"session_id": short_session, "start_frame_index": 4, **bounds},
        timeout=10,
    )

    assert response.status_code == 400
    assert response.json() == {"error": message, "code": "BAD_USER_INPUT"}
    # nothing was propagated: the clicked frame is the only one with a mask
    export = requests.get(f"{server}/annotations/{short_session}.json", timeout=30).json()
    assert [frame["frame_index"] for frame in export["frames"]] == [4]


def test_cancel_stops_the_stream_within_a_frame(server: str) -> None:
    session_id = start_session(server, "gallery/long.mp4")
    click(server, session_id, 1, 0)

    with propagate(server, session_id, 0) as response:
        stream = parts(response)
        for _ in range(3):
            next(stream)
        cancelled = graphql(
            server,
            "mutation($input: CancelPropagateInVideoInput!) "
            "{ cancelPropagateInVideo(input: $input) { success } }",
            input={"sessionId": session_id},
        )
        after = sum(1 for _ in stream)

    assert cancelled["data"]["cancelPropagateInVideo"] == {"success": True}
    # the frame being computed and the one handed over may still come; nothing more
    assert after <= 3, after
    # the session is free again: a new propagation runs to the end
    with propagate(server, session_id, LONG_FRAMES - 3) as response:
        assert [h["Frame-Current"] for h, _ in parts(response)][:3] == ["237", "238", "239"]


def test_a_session_names_the_engine_that_answers_it(server: str) -> None:
    session_id = start_session(server, "gallery/short.mp4")

    named = requests.get(f"{server}/sessions/{session_id}/engine", timeout=10)
    unknown = requests.get(f"{server}/sessions/nowhere/engine", timeout=10)

    assert (named.status_code, named.json()) == (
        200,
        {"engine": "classic: no weights, CPU", "keeps_work": False},  # opened with no cookie
    )
    assert (unknown.status_code, unknown.json()) == (
        404,
        {"error": "no session with id 'nowhere'", "code": "SESSION_NOT_FOUND"},
    )


def test_a_client_that_leaves_frees_the_session(server: str) -> None:
    session_id = start_session(server, "gallery/long.mp4")
    click(server, session_id, 1, 0)
    started = time.monotonic()
    with propagate(server, session_id, 0) as response:
        assert sum(1 for _ in parts(response)) == LONG_FRAMES
    whole = time.monotonic() - started

    # the click again remakes frame 0's anchor, so the next propagation recomputes every frame
    # (with nothing changed it would pass the stored masks through at once)
    click(server, session_id, 1, 0)
    response = propagate(server, session_id, 0)
    next(parts(response))
    response.close()

    # the propagation stops and releases the session's lock: a click is answered long before
    # the rest of the propagation could have run
    started = time.monotonic()
    result = click(server, session_id, 1, 10)
    waited = time.monotonic() - started
    assert result["data"]["addPoints"]["frameIndex"] == 10
    assert whole > 1.0, whole
    assert waited < whole / 3, (waited, whole)


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        ({"session_id": "nope"}, 404, "SESSION_NOT_FOUND", "no session with id 'nope'"),
        (
            {},
            400,
            "BAD_USER_INPUT",
            'the body must be JSON {"session_id": "<id>", "start_frame_index": <integer>}',
        ),
        (
            {"session_id": 5},
            400,
            "BAD_USER_INPUT",
            'the body must be JSON {"session_id": "<id>", "start_frame_index": <integer>}',
        ),
    ],
)
def test_bad_requests(server: str, body: dict, status: int, code: str, message: str) -> None:
    response = requests.post(f"{server}/propagate_in_video", json=body, timeout=10)

    assert response.status_code == status
    assert response.json() == {"error": message, "code": code}


def test_start_frame_out_of_range(server: str) -> None:
    session_id = start_session(server, "gallery/short.mp4")

    response = requests.post(
        f"{server}/propagate_in_video",
        json={"session_id": session_id, "start_frame_index": 12},
        timeout=10,
    )

    assert response.status_code == 400
    assert response.json() == {
        "error": "start frame index 12 is outside the video's frames 0..11",
        "code": "BAD_USER_INPUT",
    }


def test_cross_origin_preflight_from_the_demo_frontend(server: str) -> None:
    response = requests.options(
        f"{server}/propagate_in_video",
        headers={
            "Origin": "http://localhost:7262",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
        timeout=10,
    )

    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == "http://localhost:7262"
    assert "content-type" in response.headers["Access-Control-Allow-Headers"]


def test_sessions_do_not_wait_on_each_other(server: str) -> None:
    # given session A busy propagating the long video (its reader takes one part at a time)
    busy = start_session(server, "gallery/long.mp4")
    click(server, busy, 1, 0)
    other = start_session(server, "gallery/short.mp4")
    with propagate(server, busy, 0) as response:
        stream = parts(response)
        next(stream)
        # when session B clicks meanwhile
        started = time.monotonic()
        result = click(server, other, 2, 0)
        waited = time.monotonic() - started
        remaining = sum(1 for _ in stream)

    # then B is answered while A's propagation still has most of its frames to go
    assert result["data"]["addPoints"]["frameIndex"] == 0
    assert remaining > LONG_FRAMES // 2, (remaining, waited)


def test_many_sessions_at_once(server: str) -> None:
    video = make_video(12)

    def one_user(object_id: int) -> float:
        session_id = start_session(server, "gallery/short.mp4")
        click(server, session_id, object_id, 0)
        with propagate(server, session_id, 0) as response:
            last = [json.loads(body) for _, body in parts(response)][-1]
        closed = graphql(
            server,
            "mutation($input: CloseSessionInput!) { closeSession(input: $input) { success } }",
            input={"sessionId": session_id},
        )
        assert closed["data"]["closeSession"] == {"success": True}
        assert last["frame_index"] == 11
        (result,) = last["results"]
        return region_similarity(rle_decode(result["mask"]), video.masks[11][result["object_id"]])

    with ThreadPoolExecutor(max_workers=8) as pool:
        scores = list(pool.map(one_user, [1, 2] * 8))

    assert len(scores) == 16
    assert min(scores) > 0.85, scores
