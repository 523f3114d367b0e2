"""Import gives back work: an export carries each object's clicks beside its masks, and
``POST /sessions/<id>/annotations`` makes them the prompts of another session on the video."""

from __future__ import annotations

import asyncio
import copy

import numpy as np
import pytest
from django.test import Client

from segmentation.evaluation.metrics import region_similarity
from segmentation.rle import rle_decode
from segmentation.services.local_sessions import local_sessions
from segmentation.services.sessions import session_propagation
from tests.segmentation.synthetic import Video
from tests.segmentation.test_graphql_sessions import add, box_around, start

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_registry():
    local_sessions.cache_clear()
    yield
    local_sessions.cache_clear()


def export(client: Client, session_id: str) -> dict:
    response = client.get(f"/annotations/{session_id}.json")
    assert response.status_code == 200
    return response.json()


def import_into(client: Client, session_id: str, data: dict):
    return client.post(
        f"/sessions/{session_id}/annotations", data=data, content_type="application/json"
    )


def propagated(session_id: str) -> dict[int, dict[int, np.ndarray]]:
    async def run() -> dict[int, dict[int, np.ndarray]]:
        propagation = await session_propagation(session_id=session_id, start_frame_index=0)
        return {
            frame.frame_index: {item.object_id: rle_decode(item.rle) for item in frame.objects}
            async for frame in propagation.frames
        }

    return asyncio.run(run())


def prompts(session_id: str) -> dict[tuple[int, int], tuple[list, list]]:
    state = local_sessions().registry.get(session_id).state
    return {
        (object_id, frame_index): (prompt.points.tolist(), prompt.labels.tolist())
        for object_id, frames in state.prompts.items()
        for frame_index, prompt in frames.items()
    }


def clicked(client: Client, library_video: str, video: Video) -> str:
    session_id = start(client, library_video)
    add(client, session_id, video, 1)
    add(client, session_id, video, 2, frame=3)
    return session_id


def test_the_export_carries_each_objects_clicks(
    client: Client, library_video: str, video: Video
) -> None:
    session_id = clicked(client, library_video, video)

    exported = export(client, session_id)

    [first], [second] = (frame["objects"] for frame in exported["frames"])
    state = local_sessions().registry.get(session_id).state
    assert first["labels"] == [1]
    assert second["labels"] == [1]
    # the clicks normalized back, as addPoints took them (to float precision)
    scale = np.array([state.frames.width - 1, state.frames.height - 1])
    assert np.array(first["points"]) * scale == pytest.approx(state.prompts[1][0].points)
    assert set(first) == {"object_id", "mask", "points", "labels"}


def test_import_restores_the_clicks_and_the_masks(
    client: Client, library_video: str, video: Video
) -> None:
    # given a session with clicks on two objects, and its export
    original = clicked(client, library_video, video)
    exported = export(client, original)
    # when a new session on the video imports it
    session_id = start(client, library_video)
    response = import_into(client, session_id, exported)

    # then its prompts are the original's clicks, and its masks on those frames the exported ones
    assert response.status_code == 200
    assert prompts(session_id) == prompts(original)
    assert export(client, session_id) == exported
    answered = response.json()["frames"]
    assert [frame["frame_index"] for frame in answered] == [0, 3]
    # every object's mask on each frame, as addPoints answers: the other object's is empty
    for frame, sent in zip(answered, exported["frames"], strict=True):
        assert [o for o in frame["objects"] if rle_decode(o["mask"]).any()] == [
            {"object_id": o["object_id"], "mask": o["mask"]} for o in sent["objects"]
        ]


def test_a_box_travels_through_export_and_import(
    client: Client, library_video: str, video: Video
) -> None:
    original = start(client, library_video)
    add(client, original, video, 1, labels=[2, 3], points=box_around(video.masks[0][1]))
    exported = export(client, original)

    session_id = start(client, library_video)
    response = import_into(client, session_id, exported)

    assert response.status_code == 200
    assert exported["frames"][0]["objects"][0]["labels"] == [2, 3]
    assert prompts(session_id) == prompts(original)
    assert export(client, session_id) == exported


def test_a_masks_only_file_gives_the_masks_as_prompts_that_propagate(
    client: Client, library_video: str, video: Video
) -> None:
    # given an export in the old format: masks, no clicks
    exported = export(client, clicked(client, library_video, video))
    old = copy.deepcopy(exported)
    for frame in old["frames"]:
        for item in frame["objects"]:
            del item["points"], item["labels"]
    session_id = start(client, library_video)

    response = import_into(client, session_id, old)

    assert response.status_code == 200
    state = local_sessions().registry.get(session_id).state
    assert state.object_ids == [1, 2]
    assert prompts(session_id) == {}  # the masks are the prompts: add_mask keeps no clicks
    masks = propagated(session_id)
    assert sorted(masks) == list(range(len(video.masks)))
    for frame_index, frame in masks.items():
        assert sorted(frame) == [1, 2]
        for object_id, mask in frame.items():
            assert region_similarity(mask, video.masks[frame_index][object_id]) > 0.5


def test_export_then_import_then_propagate_gives_the_originals_propagation(
    client: Client, library_video: str, video: Video
) -> None:
    original = clicked(client, library_video, video)
    exported = export(client, original)
    again = start(client, library_video)
    assert import_into(client, again, exported).status_code == 200

    before, after = propagated(original), propagated(again)

    # the classic engine is deterministic: the same prompts give the same masks, bit for bit
    assert sorted(after) == sorted(before) == list(range(len(video.masks)))
    for frame_index in before:
        assert sorted(after[frame_index]) == sorted(before[frame_index])
        for object_id, mask in before[frame_index].items():
            assert np.array_equal(after[frame_index][object_id], mask)


def test_a_click_on_an_imported_mask_corrects_it(
    client: Client, library_video: str, video: Video
) -> None:
    exported = export(client, clicked(client, library_video, video))
    for frame in exported["frames"]:
        for item in frame["objects"]:
            del item["points"], item["labels"]
    session_id = start(client, library_video)
    import_into(client, session_id, exported)
    given = rle_decode(exported["frames"][0]["objects"][0]["mask"])

    # a negative click at the imported mask's centre
    ys, xs = np.nonzero(given)
    state = local_sessions().registry.get(session_id).state
    point = [
        float(xs.mean()) / (state.frames.width - 1),
        float(ys.mean()) / (state.frames.height - 1),
    ]
    result = add(client, session_id, video, 1, points=[point], labels=[0])

    mask = rle_decode(
        {
            "size": result["data"]["addPoints"]["rleMaskList"][0]["rleMask"]["size"],
            "counts": result["data"]["addPoints"]["rleMaskList"][0]["rleMask"]["counts"],
        }
    )
    assert not mask[int(ys.mean()), int(xs.mean())]
    assert 0 < mask.sum() < given.sum()  # corrected, not thrown away


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda item: item.pop("labels"),
            "frames[0].objects[0] needs both points and labels, lists of at least one click",
        ),
        (
            lambda item: item.update(points=[[1.5, 0.5]]),
            "frames[0].objects[0].points must be [x, y] pairs within [0, 1]",
        ),
        (
            lambda item: item.update(labels=[7]),
            "frames[0].objects[0].labels must be 1 (positive), 0 (negative), 2 (box top-left) "
            "or 3 (box bottom-right)",
        ),
        (
            lambda item: item.update(points=[[0.6, 0.6], [0.2, 0.2]], labels=[2, 3]),
            "frames[0].objects[0]: a box's top-left corner (label 2) must be above and left of "
            "its bottom-right corner (label 3), with an area",
        ),
    ],
)
def test_bad_clicks_are_refused_and_change_nothing(
    client: Client, library_video: str, video: Video, change, message: str
) -> None:
    exported = export(client, clicked(client, library_video, video))
    session_id = start(client, library_video)
    add(client, session_id, video, 1, frame=5)
    before = prompts(session_id)
    change(exported["frames"][0]["objects"][0])

    response = import_into(client, session_id, exported)

    assert response.status_code == 400
    assert response.json() == {"error": message, "code": "BAD_USER_INPUT"}
    assert prompts(session_id) == before


def test_an_import_into_an_unknown_session(client: Client, library_video: str) -> None:
    response = import_into(client, "nope", {"video": library_video, "frames": []})

    assert response.status_code == 404
    assert response.json() == {"error": "no session with id 'nope'", "code": "SESSION_NOT_FOUND"}
