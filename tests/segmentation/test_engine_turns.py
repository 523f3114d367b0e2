"""Engine calls in turns shared fairly between clients (segmentation/services/engine_turns.py):
a click past its client's line refused with SERVER_BUSY, a propagation's frame that leaves the
line when its client cancels or hangs up, a propagation whose reader pauses holding no turn;
then, on the real server, a person's click served before the clicks of greedy clients that came
before it."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
import requests

from core.fair_turns import FairTurns
from segmentation.engines.classic import ClassicEngine
from segmentation.errors import ErrorCode, ServerBusy, SessionNotFound
from segmentation.services.local_sessions import LocalSessions
from segmentation.services.session_registry import SessionRegistry
from segmentation.services.session_types import Clicks
from tests.conftest import running_server
from tests.segmentation.test_graphql_cost import CLICK, click_input
from tests.timing import Clock, until

CLIENT, OTHER = "203.0.113.1", "203.0.113.2"


async def until_async(condition) -> None:
    """Until ``condition()``, which threads make true: nothing on this loop to wait on."""
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 (the line's length changes in other threads)
            await asyncio.sleep(0.001)


def clicks(x: float = 0.5) -> Clicks:
    return Clicks(frame_index=0, object_id=1, points=[[x, 0.5]], labels=[1], clear_old_points=True)


@pytest.fixture
def turns() -> FairTurns:
    return FairTurns(parallel=1, queued=4, queued_per_client=1)


@pytest.fixture
def sessions(turns: FairTurns) -> LocalSessions:
    return LocalSessions(SessionRegistry(idle_timeout=60, max_sessions=4), turns)


def opened(sessions: LocalSessions, frames, client: str) -> str:
    return sessions.registry.open(state=ClassicEngine().open(frames), client=client).id


def test_a_click_past_its_clients_line_is_refused_with_the_seconds_to_wait(
    sessions: LocalSessions, turns: FairTurns, frames
):
    first, second = opened(sessions, frames, CLIENT), opened(sessions, frames, CLIENT)
    answers = []

    with turns.turn(OTHER):
        waiting = threading.Thread(
            target=lambda: answers.append(sessions.add_points(session_id=first, clicks=clicks())),
            daemon=True,
        )
        waiting.start()
        until(lambda: turns.waiting == 1)
        with pytest.raises(ServerBusy) as refused:
            sessions.add_points(session_id=second, clicks=clicks())
    waiting.join(timeout=30)

    # one turn held and one waiting, a second each (the guess before any was timed)
    assert refused.value.code is ErrorCode.SERVER_BUSY
    assert refused.value.message == "too much engine work is waiting; try again in 2 s"
    assert refused.value.retry_after == 2
    assert [answer.frame_index for answer in answers] == [0]  # the one in line was served
    assert (turns.holding, turns.waiting) == (0, 0)


def test_a_click_waiting_for_its_turn_keeps_its_session_alive_and_leaves_when_it_is_closed(
    turns: FairTurns, frames
):
    # given sessions that expire after a second idle, and the engine's one turn held
    clock = Clock()
    sessions = LocalSessions(SessionRegistry(idle_timeout=1, max_sessions=4, clock=clock), turns)
    kept, closed = opened(sessions, frames, CLIENT), opened(sessions, frames, OTHER)
    answers: dict[str, object] = {}

    def click(session_id: str) -> None:
        try:
            answers[session_id] = sessions.add_points(session_id=session_id, clicks=clicks())
        except SessionNotFound as error:
            answers[session_id] = error.message

    with turns.turn("203.0.113.3"):
        threads = [threading.Thread(target=click, args=(s,), daemon=True) for s in (kept, closed)]
        for thread in threads:
            thread.start()
        until(lambda: turns.waiting == 2)

        # when their clicks wait longer than the idle timeout, and one session is closed
        for _ in range(3):
            clock.now += 0.6
            time.sleep(0.3)  # the waits look at their sessions meanwhile
        alive = sessions.registry.touch(kept)
        sessions.registry.close(closed)
        until(lambda: closed in answers)
    for thread in threads:
        thread.join(timeout=30)

    # then the waiting click kept its session and was answered; the other left the line
    assert alive is True
    assert answers[kept].frame_index == 0
    assert answers[closed] == f"no session with id {closed!r}"
    assert (turns.holding, turns.waiting) == (0, 0)


@pytest.mark.parametrize("leaving", ["cancel", "hang up"])
async def test_a_propagation_waiting_for_its_turn_leaves_the_line_when_its_client_goes(
    sessions: LocalSessions, turns: FairTurns, frames, leaving: str
):
    session_id = opened(sessions, frames, CLIENT)
    got: list[int] = []

    async def read() -> None:
        propagation = await sessions.propagation(session_id=session_id, start_frame_index=0)
        async for frame in propagation.frames:
            got.append(frame.frame_index)

    with turns.turn(OTHER):
        reader = asyncio.create_task(read())
        await until_async(lambda: turns.waiting == 1)  # the first frame waits for its turn
        if leaving == "cancel":
            sessions.cancel_propagation(session_id=session_id)
            await asyncio.wait_for(reader, 10)  # the stream ends
        else:
            reader.cancel()
        await until_async(lambda: turns.waiting == 0)
        seen = turns.holding

    assert got == []
    assert seen == 1  # only the turn held here
    assert (turns.holding, turns.waiting) == (0, 0)


async def test_a_propagation_whose_reader_pauses_holds_no_turn(
    sessions: LocalSessions, turns: FairTurns, frames
):
    propagating, clicking = opened(sessions, frames, CLIENT), opened(sessions, frames, OTHER)
    sessions.add_points(session_id=propagating, clicks=clicks(0.3))
    propagation = await sessions.propagation(session_id=propagating, start_frame_index=0)
    stream = aiter(propagation.frames)

    first = await anext(stream)
    # the reader takes no more for now: the engine stops a frame or two ahead, between turns,
    # and a click of another session gets one (a turn held meanwhile would keep it forever)
    answer = await asyncio.wait_for(
        asyncio.to_thread(sessions.add_points, session_id=clicking, clicks=clicks()), 30
    )
    rest = [frame.frame_index async for frame in stream]

    assert first.frame_index == 0
    assert answer.frame_index == 0
    assert rest == list(range(1, 12))
    assert (turns.holding, turns.waiting) == (0, 0)


# On the real server, one engine call at a time, with a memory long enough that nothing of the
# test's own decays: two greedy clients have held the engine a while, then each sends another
# click; a person's click sent after theirs is answered first.

GREEDY = ("198.51.100.1", "198.51.100.2")
PERSON = "192.0.2.1"
START = 'mutation { startSession(input: {path: "gallery/default.mp4"}) { sessionId } }'


@pytest.fixture(scope="module")
def server(default_video_var: Path):
    with running_server(
        default_video_var,
        ENGINE_PARALLEL_CALLS="1",
        ENGINE_FAIR_MEMORY_SEC="3600",
        RATE_LIMIT_COST="0",
    ) as base_url:
        yield base_url


def post(server: str, address: str, query: str, **variables: object) -> dict:
    return requests.post(
        f"{server}/graphql",
        json={"query": query, "variables": variables},
        headers={"X-Forwarded-For": address},
        timeout=120,
    ).json()


def click(server: str, address: str, session_id: str, *, object_id: int, points: int) -> dict:
    # on frame 0 throughout (its terrain is worked out once), an object of its own each time
    clicked = {**click_input(object_id=object_id, points=points), "sessionId": session_id}
    return post(server, address, CLICK, input=clicked)


def test_a_persons_click_is_served_before_the_greedy_clients_clicks_that_came_first(server):
    sessions = {
        address: post(server, address, START)["data"]["startSession"]["sessionId"]
        for address in (*GREEDY, PERSON)
    }
    # given each greedy client held the engine for four 6-point clicks, six times the person's
    # one 4-point click will take
    warm_ups = [
        threading.Thread(
            target=lambda address=address: [
                click(server, address, sessions[address], object_id=n, points=6)
                for n in range(1, 5)
            ]
        )
        for address in GREEDY
    ]
    for thread in warm_ups:
        thread.start()
    for thread in warm_ups:
        thread.join(timeout=120)
    answered: list[tuple[str, dict]] = []

    def greedy(address: str) -> None:
        answer = click(server, address, sessions[address], object_id=5, points=6)
        answered.append((address, answer))

    # when each sends another, and then the person clicks
    greedy_clicks = [threading.Thread(target=greedy, args=(address,)) for address in GREEDY]
    for thread in greedy_clicks:
        thread.start()
    time.sleep(0.3)  # theirs under way (sent later, the person's would be first all the more)
    answer = click(server, PERSON, sessions[PERSON], object_id=1, points=4)
    answered.append((PERSON, answer))
    for thread in greedy_clicks:
        thread.join(timeout=120)

    # then the person's is answered first, and theirs too in the end
    order = [address for address, _ in answered]
    assert (order[0], sorted(order)) == (PERSON, sorted([*GREEDY, PERSON]))
    assert all(answer == {"data": {"addPoints": {"frameIndex": 0}}} for _, answer in answered)
