"""What a request would cost the engine, and the refusal of one that costs too much before any
of it runs (issue 36, finding 2: ten aliased 100-point clicks took 97 s of the server)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import requests
from graphql import parse

from segmentation.graphql.cost import operation_cost
from tests.conftest import running_server

CLICK = """mutation($input: AddPointsInput!) {
  addPoints(input: $input) { frameIndex }
}"""


def click_input(*, frame: int = 0, object_id: int = 1, points: int = 1) -> dict:
    spots = random.Random(frame * 1000 + object_id)
    return {
        "sessionId": "s",
        "frameIndex": frame,
        "objectId": object_id,
        "clearOldPoints": True,
        "labels": [1] * points,
        "points": [[spots.random(), spots.random()] for _ in range(points)],
    }


def aliased_clicks(count: int, points: int) -> tuple[str, dict]:
    """The finding's request: ``count`` aliased clicks of ``points`` points, each on its own
    frame and object, in variables."""
    declared = ", ".join(f"$i{n}: AddPointsInput!" for n in range(count))
    fields = " ".join(f"c{n}: addPoints(input: $i{n}) {{ frameIndex }}" for n in range(count))
    variables = {
        f"i{n}": click_input(frame=n, object_id=n + 1, points=points) for n in range(count)
    }
    return f"mutation({declared}) {{ {fields} }}", variables


@pytest.mark.parametrize(
    ("query", "variables", "expected"),
    [
        # a person's click: the field, the engine call, the point, the frame
        (CLICK, {"input": click_input()}, 1 + 4 + 4 + 8),
        (CLICK, {"input": click_input(points=21)}, 1 + 4 + 21 * 4 + 8),
        # the points written in the document count as those in variables do
        (
            'mutation { addPoints(input: {sessionId: "s", frameIndex: 3, objectId: 1, '
            "clearOldPoints: true, labels: [1, 0], points: [[0.1, 0.2], [0.3, 0.4]]}) "
            "{ frameIndex } }",
            None,
            1 + 4 + 2 * 4 + 8,
        ),
        # every alias counts; a frame counts once however many fields touch it
        (
            'mutation { a: clearPointsInFrame(input: {sessionId: "s", frameIndex: 2, '
            'objectId: 1}) { frameIndex } b: clearPointsInFrame(input: {sessionId: "s", '
            "frameIndex: 2, objectId: 2}) { frameIndex } }",
            None,
            2 * (1 + 4) + 8,
        ),
        # fields in fragments are the operation's own
        (
            "mutation($input: AddPointsInput!) { ...F } "
            "fragment F on Mutation { one: addPoints(input: $input) { frameIndex } "
            "... on Mutation { two: addPoints(input: $input) { frameIndex } } }",
            {"input": click_input(frame=5, points=3)},
            2 * (1 + 4 + 3 * 4) + 8,
        ),
        # opening a session, a query, a deletion ID
        ('mutation { startSession(input: {path: "p"}) { sessionId } }', None, 1 + 8),
        ("{ defaultVideo { path } videos { edges { node { path } } } }", None, 2),
        ("mutation { createDeletionId }", None, 1),
        # the finding's request
        (*aliased_clicks(10, 100), 10 * (1 + 4 + 100 * 4) + 10 * 8),
        # variables that are not what the schema wants cost what can be seen of them
        (CLICK, {"input": {"points": "many", "frameIndex": [1]}}, 1 + 4),
        (CLICK, None, 1 + 4),
    ],
    ids=[
        "one-click",
        "21-points",
        "literal-points",
        "aliases-one-frame",
        "fragments",
        "start-session",
        "query",
        "deletion-id",
        "ten-aliased-100-point-clicks",
        "malformed-variables",
        "no-variables",
    ],
)
def test_the_cost_of_a_request(query, variables, expected):
    assert operation_cost(parse(query), None, variables) == expected


def test_the_operation_named_is_the_one_counted():
    document = parse(
        "query Cheap { defaultVideo { path } } "
        "mutation Dear($input: AddPointsInput!) { addPoints(input: $input) { frameIndex } }"
    )
    variables = {"input": click_input(points=10)}

    assert operation_cost(document, "Cheap", variables) == 1
    assert operation_cost(document, "Dear", variables) == 1 + 4 + 10 * 4 + 8
    assert operation_cost(document, None, variables) == 0  # GraphQL refuses it anyway
    assert operation_cost(document, "Other", variables) == 0


@pytest.fixture(scope="module")
def server(default_video_var: Path):
    var_dir = default_video_var
    with running_server(var_dir) as base_url:
        yield base_url


def graphql(
    server: str, query: str, variables: dict | None = None, **headers: str
) -> requests.Response:
    return requests.post(
        f"{server}/graphql",
        json={"query": query, "variables": variables or {}},
        headers=headers,
        timeout=60,
    )


def test_ten_aliased_hundred_point_clicks_are_refused_before_the_engine_runs(server):
    # given a session on the default video
    started = graphql(
        server, 'mutation { startSession(input: {path: "gallery/default.mp4"}) { sessionId } }'
    ).json()
    session_id = started["data"]["startSession"]["sessionId"]
    query, variables = aliased_clicks(10, 100)
    for value in variables.values():
        value["sessionId"] = session_id

    # when the finding's request is sent (by a client of its own: what it cost counts against
    # that client's rate limit, and is over it)
    answer = graphql(server, query, variables, **{"X-Forwarded-For": "198.51.100.20"})

    # then it is refused as a whole, and the session has no mask on any frame
    assert (answer.status_code, answer.json()) == (
        400,
        {
            "errors": [
                {
                    "message": "the operation would cost the engine 4130; at most 100 "
                    "(each root field 1, each engine call 4 more, each point 4, each frame 8)",
                    "extensions": {"code": "QUERY_TOO_COMPLEX"},
                }
            ]
        },
    )
    exported = requests.get(f"{server}/annotations/{session_id}.json", timeout=30).json()
    assert exported == {"video": "gallery/default.mp4", "frames": []}


def test_a_click_within_the_budget_runs(server):
    started = graphql(
        server, 'mutation { startSession(input: {path: "gallery/default.mp4"}) { sessionId } }'
    ).json()
    session_id = started["data"]["startSession"]["sessionId"]

    answer = graphql(server, CLICK, {"input": {**click_input(points=3), "sessionId": session_id}})

    assert answer.json() == {"data": {"addPoints": {"frameIndex": 0}}}
