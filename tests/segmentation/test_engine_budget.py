"""The engine time a session's prompts may take (segmentation/services/engine_budget.py): exact
arithmetic on a clock of the test's own, then a session that spends its budget on the real
server, refused with RESOURCE_EXHAUSTED and Retry-After while another session clicks on."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from segmentation.errors import ResourceExhausted
from segmentation.services.engine_budget import EngineBudget
from tests.conftest import running_server
from tests.segmentation.test_graphql_cost import CLICK, click_input
from tests.timing import Clock


def test_a_session_may_spend_its_burst_then_waits_for_its_share():
    clock = Clock()
    budget = EngineBudget(burst=10, share=0.25, clock=clock)

    budget.check()
    budget.spend(9.5)
    budget.check()  # half a second left: the next prompt runs
    budget.spend(4.5)  # ... and may overdraw: 4 s below zero

    with pytest.raises(ResourceExhausted) as refused:
        budget.check()
    assert refused.value.retry_after == 16  # 4 s at a quarter of a second per second
    assert refused.value.message == (
        "this session used its engine time (a share of 0.25 of a core, bursts of 10 s); "
        "try again in 16 s"
    )

    clock.now += 15.5
    with pytest.raises(ResourceExhausted) as still:
        budget.check()
    assert still.value.retry_after == 1
    clock.now += 0.5
    budget.check()  # back at zero: the next prompt runs


def test_the_bucket_holds_no_more_than_the_burst():
    clock = Clock()
    budget = EngineBudget(burst=2, share=0.5, clock=clock)

    clock.now += 3600
    budget.spend(2.5)

    with pytest.raises(ResourceExhausted) as refused:
        budget.check()
    assert refused.value.retry_after == 1


@pytest.mark.parametrize(("burst", "share"), [(0, 0.25), (10, 0)])
def test_a_zero_burst_or_share_is_no_budget(burst, share):
    budget = EngineBudget(burst=burst, share=share, clock=Clock())

    budget.spend(1e6)
    budget.check()

    assert budget.enabled is False


@pytest.fixture(scope="module")
def server(default_video_var: Path):
    var_dir = default_video_var
    # a burst of one engine-second, refilled at a hundredth of a core
    with running_server(
        var_dir, SESSION_ENGINE_BURST_SEC="1", SESSION_ENGINE_SHARE_PERCENT="1"
    ) as base_url:
        yield base_url


def start(server: str) -> str:
    answer = requests.post(
        f"{server}/graphql",
        json={
            "query": 'mutation { startSession(input: {path: "gallery/default.mp4"}) { sessionId } }'
        },
        timeout=60,
    ).json()
    return answer["data"]["startSession"]["sessionId"]


def click(server: str, session_id: str, *, frame: int, points: int) -> requests.Response:
    variables = {"input": {**click_input(frame=frame, points=points), "sessionId": session_id}}
    return requests.post(
        f"{server}/graphql", json={"query": CLICK, "variables": variables}, timeout=60
    )


def test_a_session_that_spent_its_engine_time_is_told_when_to_come_back(server):
    greedy, other = start(server), start(server)

    answers = []
    for frame in range(20):
        answers.append(click(server, greedy, frame=frame, points=20))
        if "errors" in answers[-1].json():
            break
    refused = answers[-1]
    neighbour = click(server, other, frame=0, points=1)

    # some clicks ran, and then one was refused, saying when to come back
    assert len(answers) >= 2
    assert all(
        a.json() == {"data": {"addPoints": {"frameIndex": n}}} for n, a in enumerate(answers[:-1])
    )
    wait = int(refused.headers["Retry-After"])
    assert wait >= 1
    error = refused.json()["errors"][0]
    assert error["extensions"] == {"code": "RESOURCE_EXHAUSTED", "retryAfter": wait}
    assert error["message"] == (
        "this session used its engine time (a share of 0.01 of a core, bursts of 1 s); "
        f"try again in {wait} s"
    )
    # the other session's click runs
    assert neighbour.json() == {"data": {"addPoints": {"frameIndex": 0}}}
