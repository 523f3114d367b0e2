"""Sessions through GraphQL, as the SAM 2 demo frontend drives them."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import Client

from segmentation.evaluation.metrics import region_similarity
from segmentation.models import DeletionId, TermsAcceptance
from segmentation.rle import rle_decode
from segmentation.services.local_sessions import local_sessions
from segmentation.services.uploads import annotations_check
from tests.segmentation.synthetic import HEIGHT, WIDTH, Video
from tests.segmentation.test_graphql_videos import gql

pytestmark = pytest.mark.django_db

START = "mutation($input: StartSessionInput!) { startSession(input: $input) { sessionId } }"
ADD = """mutation($input: AddPointsInput!) {
  addPoints(input: $input) { frameIndex rleMaskList { objectId rleMask { size counts order } } }
}"""
CLEAR_FRAME = """mutation($input: ClearPointsInFrameInput!) {
  clearPointsInFrame(input: $input) { frameIndex rleMaskList { objectId rleMask { counts size } } }
}"""
CLEAR_VIDEO = """mutation($input: ClearPointsInVideoInput!) {
  clearPointsInVideo(input: $input) { success }
}"""
REMOVE = """mutation($input: RemoveObjectInput!) {
  removeObject(input: $input) { frameIndex rleMaskList { objectId rleMask { counts size } } }
}"""
CANCEL = """mutation($input: CancelPropagateInVideoInput!) {
  cancelPropagateInVideo(input: $input) { success }
}"""
CLOSE = "mutation($input: CloseSessionInput!) { closeSession(input: $input) { success } }"
PING = "query($input: PingInput!) { ping(input: $input) { success } }"


@pytest.fixture(autouse=True)
def fresh_registry():
    local_sessions.cache_clear()
    yield
    local_sessions.cache_clear()


def start(client: Client, path: str) -> str:
    result = gql(client, START, input={"path": path})
    return result["data"]["startSession"]["sessionId"]


def centre(mask: np.ndarray) -> list[float]:
    ys, xs = np.nonzero(mask)
    return [float(xs.mean()) / WIDTH, float(ys.mean()) / HEIGHT]


def add(client: Client, session_id: str, video: Video, object_id: int, frame: int = 0, **extra):
    point = centre(video.masks[frame][object_id])
    return gql(
        client,
        ADD,
        input={
            "sessionId": session_id,
            "frameIndex": frame,
            "clearOldPoints": True,
            "objectId": object_id,
            "labels": [1],
            "points": [point],
        }
        | extra,
    )


def masks_of(result: dict) -> dict[int, np.ndarray]:
    return {
        item["objectId"]: rle_decode(
            {"size": item["rleMask"]["size"], "counts": item["rleMask"]["counts"]}
        )
        for item in result["rleMaskList"]
    }


def test_click_returns_every_object_as_rle(
    client: Client, library_video: str, video: Video
) -> None:
    session_id = start(client, library_video)

    add(client, session_id, video, 1)
    result = add(client, session_id, video, 2)["data"]["addPoints"]

    assert result["frameIndex"] == 0
    assert [item["objectId"] for item in result["rleMaskList"]] == [1, 2]
    assert {item["rleMask"]["order"] for item in result["rleMaskList"]} == {"F"}
    assert {tuple(item["rleMask"]["size"]) for item in result["rleMaskList"]} == {(HEIGHT, WIDTH)}
    masks = masks_of(result)
    assert region_similarity(masks[1], video.masks[0][1]) > 0.9
    assert region_similarity(masks[2], video.masks[0][2]) > 0.9


def test_clicks_report_the_engines_time(client: Client, library_video: str, video: Video) -> None:
    session_id = start(client, library_video)
    point = centre(video.masks[0][1])

    response = client.post(
        "/graphql",
        {
            "query": ADD,
            "variables": {
                "input": {
                    "sessionId": session_id,
                    "frameIndex": 0,
                    "clearOldPoints": True,
                    "objectId": 1,
                    "labels": [1],
                    "points": [point],
                }
            },
        },
        content_type="application/json",
    )

    name, duration = response["Server-Timing"].split(";dur=")
    assert name == "engine"
    assert 0.0 < float(duration) < 60_000.0


def test_clear_points_in_frame(client: Client, library_video: str, video: Video) -> None:
    session_id = start(client, library_video)
    add(client, session_id, video, 1)
    add(client, session_id, video, 2)

    result = gql(
        client, CLEAR_FRAME, input={"sessionId": session_id, "frameIndex": 0, "objectId": 1}
    )["data"]["clearPointsInFrame"]

    masks = masks_of(result)
    assert not masks[1].any()
    assert region_similarity(masks[2], video.masks[0][2]) > 0.9


def test_remove_object_returns_the_frames_it_had_points_on(
    client: Client, library_video: str, video: Video
) -> None:
    session_id = start(client, library_video)
    add(client, session_id, video, 1)
    add(client, session_id, video, 2)
    add(client, session_id, video, 1, frame=5)

    result = gql(client, REMOVE, input={"sessionId": session_id, "objectId": 1})["data"]

    frames = result["removeObject"]
    assert [frame["frameIndex"] for frame in frames] == [0, 5]
    assert [[item["objectId"] for item in frame["rleMaskList"]] for frame in frames] == [[2], [2]]


def test_clear_points_in_video_resets(client: Client, library_video: str, video: Video) -> None:
    session_id = start(client, library_video)
    add(client, session_id, video, 1)

    cleared = gql(client, CLEAR_VIDEO, input={"sessionId": session_id})

    assert cleared["data"]["clearPointsInVideo"] == {"success": True}
    result = gql(
        client, CLEAR_FRAME, input={"sessionId": session_id, "frameIndex": 0, "objectId": 3}
    )
    assert result["data"]["clearPointsInFrame"]["rleMaskList"] == []


def test_ping_close_and_cancel(client: Client, library_video: str) -> None:
    session_id = start(client, library_video)

    assert gql(client, PING, input={"sessionId": session_id})["data"]["ping"] == {"success": True}
    assert gql(client, CANCEL, input={"sessionId": session_id})["data"] == {
        "cancelPropagateInVideo": {"success": True}
    }
    assert gql(client, CLOSE, input={"sessionId": session_id})["data"] == {
        "closeSession": {"success": True}
    }
    assert gql(client, CLOSE, input={"sessionId": session_id})["data"] == {
        "closeSession": {"success": False}
    }
    assert gql(client, PING, input={"sessionId": session_id})["data"]["ping"] == {"success": False}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"points": [[1.5, 0.5]]}, "point coordinates must be normalized to [0, 1]"),
        ({"labels": [1, 1]}, "points and labels differ in length: 1 points, 2 labels"),
        (
            {"labels": [4]},
            "labels must be 1 (positive), 0 (negative), 2 (box top-left) or 3 (box bottom-right)",
        ),
        ({"frameIndex": 12}, "frame index 12 is outside the video's frames 0..11"),
        ({"objectId": -1}, "object ID must not be negative, got -1"),
        ({"points": [[0.5]]}, "points must be a list of [x, y] pairs of numbers"),
    ],
)
def test_bad_clicks_are_bad_user_input_and_change_nothing(
    client: Client, library_video: str, video: Video, extra: dict, message: str
) -> None:
    session_id = start(client, library_video)
    before = add(client, session_id, video, 1)["data"]["addPoints"]

    result = add(client, session_id, video, 1, **extra)

    assert result["data"] is None
    assert result["errors"][0]["message"] == message
    assert result["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT"}
    # the session still answers as before
    again = gql(
        client, CLEAR_FRAME, input={"sessionId": session_id, "frameIndex": 0, "objectId": 9}
    )
    assert masks_of(again["data"]["clearPointsInFrame"]).keys() == {1}
    assert np.array_equal(masks_of(again["data"]["clearPointsInFrame"])[1], masks_of(before)[1])


def box_around(mask: np.ndarray, margin: int = 8) -> list[list[float]]:
    ys, xs = np.nonzero(mask)
    corners = [
        (max(xs.min() - margin, 0), max(ys.min() - margin, 0)),
        (min(xs.max() + margin, WIDTH - 1), min(ys.max() + margin, HEIGHT - 1)),
    ]
    return [[x / (WIDTH - 1), y / (HEIGHT - 1)] for x, y in corners]


def test_a_box_alone_gives_the_objects_mask(
    client: Client, library_video: str, video: Video
) -> None:
    session_id = start(client, library_video)

    result = add(client, session_id, video, 1, labels=[2, 3], points=box_around(video.masks[0][1]))[
        "data"
    ]["addPoints"]

    assert result["frameIndex"] == 0
    assert [item["objectId"] for item in result["rleMaskList"]] == [1]
    assert result["rleMaskList"][0]["rleMask"]["size"] == [HEIGHT, WIDTH]
    assert region_similarity(masks_of(result)[1], video.masks[0][1]) >= 0.96


BOX_PAIRING = (
    "a box is a point labelled 2 (top-left) followed by one labelled 3 (bottom-right), "
    "before any clicks"
)
BOX_AREA = (
    "a box's top-left corner (label 2) must be above and left of its bottom-right corner "
    "(label 3), with an area"
)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"labels": [2, 3], "points": [[0.2, 0.2], [0.2, 0.6]]}, BOX_AREA),
        ({"labels": [2, 3], "points": [[0.6, 0.6], [0.2, 0.2]]}, BOX_AREA),
        (
            {"labels": [2, 3], "points": [[0.2, 0.2], [1.1, 0.6]]},
            "a box must lie inside the frame (corners normalized to [0, 1])",
        ),
        ({"labels": [2, 1], "points": [[0.2, 0.2], [0.6, 0.6]]}, BOX_PAIRING),
        ({"labels": [1, 3], "points": [[0.2, 0.2], [0.6, 0.6]]}, BOX_PAIRING),
        (
            {"labels": [2, 3, 2, 3], "points": [[0.1, 0.1], [0.5, 0.5], [0.2, 0.2], [0.6, 0.6]]},
            "at most one box (one point labelled 2 and one labelled 3)",
        ),
        (
            {"labels": [2, 3], "points": [[0.2, 0.2], [0.6, 0.6]], "clearOldPoints": False},
            "a box replaces the object's points on the frame: clear old points",
        ),
    ],
)
def test_bad_boxes_are_bad_user_input_and_change_nothing(
    client: Client, library_video: str, video: Video, extra: dict, message: str
) -> None:
    session_id = start(client, library_video)
    before = add(client, session_id, video, 1)["data"]["addPoints"]

    result = add(client, session_id, video, 1, **extra)

    assert result["data"] is None
    assert result["errors"][0]["message"] == message
    assert result["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT"}
    again = gql(
        client, CLEAR_FRAME, input={"sessionId": session_id, "frameIndex": 0, "objectId": 9}
    )
    assert masks_of(again["data"]["clearPointsInFrame"]).keys() == {1}
    assert np.array_equal(masks_of(again["data"]["clearPointsInFrame"])[1], masks_of(before)[1])


def test_unknown_session_and_video(client: Client, library_video: str, video: Video) -> None:
    missing = add(client, "no-such-session", video, 1)
    unknown = gql(client, START, input={"path": "gallery/nothing.mp4"})

    assert missing["errors"][0]["extensions"] == {"code": "SESSION_NOT_FOUND"}
    assert missing["errors"][0]["message"] == "no session with id 'no-such-session'"
    assert unknown["errors"][0]["extensions"] == {"code": "VIDEO_NOT_FOUND"}
    assert unknown["errors"][0]["message"] == "no video at 'gallery/nothing.mp4'"


def test_a_nul_in_a_video_path_is_no_video(client: Client, library_video: str) -> None:
    # PostgreSQL refuses a NUL in a query ("text fields cannot contain NUL"): no stored path
    # holds one, so the answer is the one for any unknown path, on every database
    unknown = gql(client, START, input={"path": "gallery/\x00.mp4"})

    assert unknown["errors"][0]["extensions"] == {"code": "VIDEO_NOT_FOUND"}
    assert unknown["errors"][0]["message"] == "no video at 'gallery/\\x00.mp4'"


def test_too_many_sessions(client: Client, library_video: str, settings) -> None:
    settings.MAX_SESSIONS = 2
    start(client, library_video)
    start(client, library_video)

    result = gql(client, START, input={"path": library_video})

    assert result["errors"][0]["extensions"] == {"code": "TOO_MANY_SESSIONS"}
    assert result["errors"][0]["message"] == (
        "the server holds its maximum of 2 sessions; close one or try again later"
    )


def test_terms_and_deletion_ids_follow_the_cookie_session(client: Client) -> None:
    first = gql(client, "mutation { createDeletionId }")["data"]["createDeletionId"]
    second = gql(client, "mutation { createDeletionId }")["data"]["createDeletionId"]
    accepted = gql(client, "mutation { acceptTos acceptTermsOfService }")["data"]

    assert first != second
    assert len(first) == 32
    assert accepted == {"acceptTos": True, "acceptTermsOfService": "2024-07-29"}
    session_key = client.session.session_key
    assert set(DeletionId.objects.values_list("session_key", flat=True)) == {session_key}
    assert list(TermsAcceptance.objects.values_list("version", flat=True)) == ["2024-07-29"] * 2


def test_export_round_trips_through_upload_annotations(
    client: Client, library_video: str, video: Video
) -> None:
    session_id = start(client, library_video)
    add(client, session_id, video, 1)
    add(client, session_id, video, 2, frame=3)

    response = client.get(f"/annotations/{session_id}.json")

    assert response.status_code == 200
    # named after the video (uploads/shapes.mp4, which has no display name)
    assert response["Content-Disposition"] == 'attachment; filename="shapes-annotations.json"'
    exported = response.json()
    assert exported["video"] == library_video
    assert [frame["frame_index"] for frame in exported["frames"]] == [0, 3]
    assert [o["object_id"] for o in exported["frames"][0]["objects"]] == [1]
    assert [o["object_id"] for o in exported["frames"][1]["objects"]] == [2]
    first = rle_decode(exported["frames"][0]["objects"][0]["mask"])
    assert region_similarity(first, video.masks[0][1]) > 0.9
    # the export is a file uploadAnnotations accepts
    assert annotations_check(exported).path == library_video


def test_export_of_an_unknown_session(client: Client) -> None:
    response = client.get("/annotations/nope.json")

    assert response.status_code == 404
    assert response.json() == {"error": "no session with id 'nope'", "code": "SESSION_NOT_FOUND"}
