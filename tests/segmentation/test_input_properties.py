"""Hostile and malformed input, generated (hypothesis): masks as COCO RLE, annotation files, and
the points, labels and indices of ``addPoints``. Each is accepted or refused with the API's
error, never anything else, and a refusal changes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.core.cache import cache
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from segmentation.errors import BadUserInput, VideoNotFound
from segmentation.rle import rle_decode, rle_encode
from segmentation.services.local_sessions import local_sessions
from segmentation.services.sessions import session_annotations
from segmentation.services.uploads import annotations_check
from tests.segmentation.box_prompts import BoxPrompt, box_prompts
from tests.segmentation.synthetic import HEIGHT, WIDTH

pytestmark = pytest.mark.django_db
FIXTURES_ONCE = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)
NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**40), 2**40))


@settings(max_examples=150, deadline=None)
@given(arrays(np.bool_, st.tuples(st.integers(1, 40), st.integers(1, 40))))
def test_rle_round_trip(mask: np.ndarray) -> None:
    np.testing.assert_array_equal(rle_decode(rle_encode(mask)), mask)


@settings(max_examples=250, deadline=None)
@given(st.one_of(
    JSON,
    st.fixed_dictionaries({
        "size": st.lists(st.integers(-5, 50), max_size=3),
        "counts": st.text(max_size=40),
    }),
    st.fixed_dictionaries({
        "size": st.just([12, 9]),
        "counts": st.text(st.characters(min_codepoint=48, max_codepoint=111), max_size=30),
    }),
))  # fmt: skip
def test_rle_decode_takes_a_mask_or_raises_value_error(rle: object) -> None:
    try:
        mask = rle_decode(rle)
    except ValueError:
        return  # the one exception it may raise
    assert mask.dtype == np.bool_
    assert list(mask.shape) == rle["size"]


def well_formed(path: str) -> dict:
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[10:40, 20:60] = True
    return {
        "video": path,
        "frames": [{"frame_index": 3, "objects": [{"object_id": 1, "mask": rle_encode(mask)}]}],
    }


@FIXTURES_ONCE
@given(data=st.data())
def test_annotation_files_are_accepted_or_refused_with_a_reason(library_video: str, data) -> None:
    # anything at all, or a well-formed file with one part replaced by anything
    document = well_formed(library_video)
    where = data.draw(
        st.sampled_from(
            ["whole", "video", "frames", "frame", "index", "objects", "object", "id", "mask"]
        )
    )
    junk = data.draw(JSON)
    frame = document["frames"][0]
    item = frame["objects"][0]
    if where == "whole":
        document = junk
    elif where in ("video", "frames"):
        document[where] = junk
    elif where == "frame":
        document["frames"][0] = junk
    elif where == "index":
        frame["frame_index"] = junk
    elif where == "objects":
        frame["objects"] = junk
    elif where == "object":
        frame["objects"][0] = junk
    elif where == "id":
        item["object_id"] = junk
    else:
        item["mask"] = junk
    try:
        video = annotations_check(json.loads(json.dumps(document)))
    except (BadUserInput, VideoNotFound):
        return  # the API's refusals, with their codes
    assert video.path == library_video


ADD = """mutation($input: AddPointsInput!) {
  addPoints(input: $input) { frameIndex rleMaskList { objectId rleMask { counts } } }
}"""


@settings(FIXTURES_ONCE, max_examples=50)
@given(
    points=st.one_of(
        st.lists(st.lists(NUMBER, max_size=3), max_size=6),
        st.lists(st.just([0.5, 0.5]), min_size=1000, max_size=5000),
        JSON,
    ),
    labels=st.one_of(
        st.lists(st.integers(-(2**40), 2**40), max_size=6),
        st.lists(st.just(1), min_size=1000, max_size=5000),
        JSON,
    ),
    frame_index=st.one_of(st.integers(-(2**40), 2**40), JSON),
    object_id=st.one_of(st.integers(-(2**40), 2**40), JSON),
)
def test_add_points_takes_any_input_without_harm(
    client: Client, library_video: str, points, labels, frame_index, object_id
) -> None:
    local_sessions.cache_clear()
    cache.clear()  # each example within its rate limit (the test client has one address)
    started = client.post(
        "/graphql",
        {
            "query": "mutation($p: String!) { startSession(input: {path: $p}) { sessionId } }",
            "variables": {"p": library_video},
        },
        content_type="application/json",
    ).json()
    session_id = started["data"]["startSession"]["sessionId"]
    before = session_annotations(session_id=session_id)
    variables = {
        "input": {
            "sessionId": session_id,
            "frameIndex": frame_index,
            "objectId": object_id,
            "clearOldPoints": True,
            "labels": labels,
            "points": points,
        }
    }

    response = client.post(
        "/graphql", {"query": ADD, "variables": variables}, content_type="application/json"
    )

    body = response.json()
    assert response.status_code in (200, 400)
    if body.get("data") and body["data"].get("addPoints"):
        assert body["data"]["addPoints"]["frameIndex"] == frame_index
        return
    codes = {error.get("extensions", {}).get("code") for error in body["errors"]}
    # None: GraphQL's own type errors; QUERY_TOO_COMPLEX: thousands of points cost too much
    assert codes <= {"BAD_USER_INPUT", "QUERY_TOO_COMPLEX", None}
    assert session_annotations(session_id=session_id) == before


BOXED = """mutation($input: AddPointsInput!) {
  addPoints(input: $input) { frameIndex rleMaskList { objectId rleMask { size counts } } }
}"""


@settings(FIXTURES_ONCE, max_examples=25)
@given(prompt=box_prompts())
def test_add_points_with_a_box_answers_as_the_docs_say(
    client: Client, library_video: str, prompt: BoxPrompt
) -> None:
    # given a session with object 1 clicked, so that a refusal has masks to leave alone
    local_sessions.cache_clear()
    cache.clear()
    session_id = graphql(
        client,
        "mutation($p: String!) { startSession(input: {path: $p}) { sessionId } }",
        {"p": library_video},
    )["data"]["startSession"]["sessionId"]
    click = {"sessionId": session_id, "frameIndex": 0, "clearOldPoints": True}
    first = {"objectId": 1, "labels": [1], "points": [[0.5, 0.5]]}
    graphql(client, BOXED, {"input": click | first})
    before = session_annotations(session_id=session_id)

    # when object 2 is given the box
    body = graphql(
        client,
        BOXED,
        {
            "input": click
            | {
                "objectId": 2,
                "clearOldPoints": prompt.clear_old_points,
                "labels": prompt.labels,
                "points": prompt.points,
            }
        },
    )

    # then
    if prompt.message is None:
        answer = body["data"]["addPoints"]
        assert answer["frameIndex"] == 0
        assert [item["objectId"] for item in answer["rleMaskList"]] == [1, 2]
        assert [item["rleMask"]["size"] for item in answer["rleMaskList"]] == [[HEIGHT, WIDTH]] * 2
        return
    assert body["data"] is None
    assert [error["message"] for error in body["errors"]] == [prompt.message]
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT"}
    assert session_annotations(session_id=session_id) == before


def graphql(client: Client, query: str, variables: dict) -> dict:
    response = client.post(
        "/graphql", {"query": query, "variables": variables}, content_type="application/json"
    )
    return response.json()
