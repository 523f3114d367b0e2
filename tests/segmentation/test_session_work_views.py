"""``GET /sessions/<id>/work`` and ``GET /sessions/<id>/work/masks``: a session's stored work
read beside GraphQL, as the annotator reads it, with every input bounded."""

from __future__ import annotations

import asyncio

import pytest
from django.test import Client

from segmentation.models import Work, WorkMask, WorkPrompt
from segmentation.services.local_sessions import local_sessions
from segmentation.services.sessions import session_propagation
from segmentation.services.videos import media_path
from tests.segmentation.synthetic import Video
from tests.segmentation.test_graphql_sessions import START, add, start

pytestmark = pytest.mark.django_db(transaction=True)

BOX = [[1.0, 2.0], [30.0, 40.0]]
INDEX = "must be a frame index (a whole number from 0)"


@pytest.fixture(autouse=True)
def fresh_registry():
    local_sessions.cache_clear()
    yield
    local_sessions.cache_clear()


def owned_session(path: str, owner: str = "owner-a") -> tuple[str, int]:
    """A session of ``owner`` on the video; its ID and its work's."""
    session_id = local_sessions().open(video_path=path, file=str(media_path(path)), owner=owner)
    return session_id, Work.objects.get(owner=owner).id


def keep(work_id: int, frames: dict[int, dict[int, str]]) -> None:
    WorkMask.objects.bulk_create(
        WorkMask(work_id=work_id, frame_index=frame, object_id=object_id, counts=counts)
        for frame, masks in frames.items()
        for object_id, counts in masks.items()
    )


def test_the_summary_gives_each_objects_masked_frames_as_runs_and_its_prompts(
    client: Client, library_video: str
) -> None:
    # given object 1 masked on frames 0-2 and 5, object 3 on 1-3 and 86,399; prompts on 1 and 3
    session_id, work_id = owned_session(library_video)
    masked = {0: [1], 1: [1, 3], 2: [1, 3], 3: [3], 5: [1], 86_399: [3]}
    keep(work_id, {frame: {i: f"c{frame}-{i}" for i in ids} for frame, ids in masked.items()})
    WorkPrompt.objects.create(
        work_id=work_id, object_id=1, frame_index=1, points=[[10.5, 20.0]], labels=[1]
    )
    WorkPrompt.objects.create(work_id=work_id, object_id=3, frame_index=3, points=None, labels=None)
    WorkPrompt.objects.create(
        work_id=work_id, object_id=4, frame_index=7, points=BOX, labels=[2, 3]
    )

    response = client.get(f"/sessions/{session_id}/work")

    assert response.status_code == 200
    assert response.json() == {
        "kept": True,
        "video": library_video,
        "objects": [
            {
                "object_id": 1,
                "mask_runs": [[0, 2], [5, 5]],
                "prompts": [{"frame_index": 1, "points": [[10.5, 20.0]], "labels": [1]}],
            },
            {
                "object_id": 3,
                "mask_runs": [[1, 3], [86_399, 86_399]],
                "prompts": [{"frame_index": 3, "points": None, "labels": None}],
            },
            {
                "object_id": 4,
                "mask_runs": [],
                "prompts": [{"frame_index": 7, "points": BOX, "labels": [2, 3]}],
            },
        ],
    }


def test_the_masks_of_a_range_are_its_frames_with_a_mask_in_order(
    client: Client, library_video: str
) -> None:
    session_id, work_id = owned_session(library_video)
    keep(work_id, {4: {2: "b", 1: "a"}, 9: {1: "c"}, 12: {1: "d"}, 250: {1: "e"}})

    response = client.get(f"/sessions/{session_id}/work/masks?first=9&last=248")
    whole = client.get(f"/sessions/{session_id}/work/masks?first=0&last=4")

    assert response.status_code == 200
    assert response.json() == {
        "kept": True,
        "first": 9,
        "last": 248,
        "frames": [
            {"frame_index": 9, "masks": [{"object_id": 1, "counts": "c"}]},
            {"frame_index": 12, "masks": [{"object_id": 1, "counts": "d"}]},
        ],
    }
    assert whole.json()["frames"] == [
        {
            "frame_index": 4,
            "masks": [{"object_id": 1, "counts": "a"}, {"object_id": 2, "counts": "b"}],
        }
    ]


def runs(summary: dict) -> list[tuple[int, list[list[int]]]]:
    return [(item["object_id"], item["mask_runs"]) for item in summary["objects"]]


def test_clicks_and_a_propagation_through_the_api_are_read_back(
    client: Client, library_video: str, video: Video
) -> None:
    # given a client with a cookie session (its owner): two objects clicked, then propagated
    client.get("/annotate/")  # makes the cookie session the owner is
    started = client.post(
        "/graphql",
        {"query": START, "variables": {"input": {"path": library_video}}},
        content_type="application/json",
        headers={"X-Keep-Work": "1"},  # as the annotator asks for its work to be kept
    ).json()
    session_id = started["data"]["startSession"]["sessionId"]
    add(client, session_id, video, 1)
    add(client, session_id, video, 2, frame=3)
    summary = client.get(f"/sessions/{session_id}/work").json()

    async def propagate() -> int:
        propagation = await session_propagation(session_id=session_id, start_frame_index=0)
        return len([frame async for frame in propagation.frames])

    assert asyncio.run(propagate()) == 12
    after = client.get(f"/sessions/{session_id}/work").json()
    masks = client.get(f"/sessions/{session_id}/work/masks?first=0&last=11").json()

    # then each clicked frame, then every frame, with the clicks in the video's pixels
    assert runs(summary) == [(1, [[0, 0]]), (2, [[3, 3]])]
    assert runs(after) == [(1, [[0, 11]]), (2, [[0, 11]])]
    rows = {(p.object_id, p.frame_index): p for p in WorkPrompt.objects.all()}
    assert after["objects"][0]["prompts"] == [
        {"frame_index": 0, "points": rows[1, 0].points, "labels": [1]}
    ]
    assert after["objects"][1]["prompts"] == [
        {"frame_index": 3, "points": rows[2, 3].points, "labels": [1]}
    ]
    stored = {
        (m.frame_index, m.object_id): m.counts for m in WorkMask.objects.order_by("frame_index")
    }
    assert {
        (frame["frame_index"], item["object_id"]): item["counts"]
        for frame in masks["frames"]
        for item in frame["masks"]
    } == stored
    assert len(stored) == 24


def test_a_session_that_keeps_no_work_answers_none(client: Client, library_video: str) -> None:
    session_id = start(client, library_video)  # no cookie session: no owner

    assert client.get(f"/sessions/{session_id}/work").json() == {
        "kept": False,
        "video": None,
        "objects": [],
    }
    assert client.get(f"/sessions/{session_id}/work/masks?first=0&last=3").json() == {
        "kept": False,
        "first": 0,
        "last": 3,
        "frames": [],
    }


@pytest.mark.parametrize("path", ["work", "work/masks?first=0&last=1"])
def test_a_session_that_is_not_live_is_not_found(
    client: Client, library_video: str, path: str
) -> None:
    session_id, _ = owned_session(library_video)
    local_sessions().close(session_id=session_id)

    for unknown in (session_id, "x" * 65):
        response = client.get(f"/sessions/{unknown}/{path}")
        assert response.status_code == 404
        assert response.json() == {
            "error": f"no session with id {unknown!r}",
            "code": "SESSION_NOT_FOUND",
        }


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("first=0&last=240", "the frames 0 to 240 are more than 240 at once"),
        ("first=5&last=4", "the frames 5 to 4 are not a range of frames"),
        ("first=0", f"last {INDEX}: ''"),
        ("first=-1&last=3", f"first {INDEX}: '-1'"),
        ("first=1e3&last=3", f"first {INDEX}: '1e3'"),
        ("first=0&last=1234567890", f"last {INDEX}: '1234567890'"),
        ("first=%D9%A3&last=3", f"first {INDEX}: '٣'"),
    ],
)
def test_a_range_out_of_bounds_is_refused(
    client: Client, library_video: str, query: str, error: str
) -> None:
    session_id, work_id = owned_session(library_video)
    keep(work_id, {0: {1: "a"}})

    response = client.get(f"/sessions/{session_id}/work/masks?{query}")

    assert response.status_code == 400
    assert response.json() == {"error": error, "code": "BAD_USER_INPUT"}


def test_the_reads_are_get_only(client: Client, library_video: str) -> None:
    session_id, _ = owned_session(library_video)

    assert client.post(f"/sessions/{session_id}/work").status_code == 405
    assert client.post(f"/sessions/{session_id}/work/masks?first=0&last=1").status_code == 405
