from __future__ import annotations

import logging

import numpy as np
import pytest

from segmentation.engines.classic import ClassicEngine
from segmentation.errors import (
    ErrorCode,
    SessionNotFound,
    TooManyClientSessions,
    TooManySessions,
)
from segmentation.services.local_sessions import LocalSessions
from segmentation.services.session_registry import SessionRegistry
from segmentation.services.session_types import HeldSession
from tests.segmentation.synthetic import HEIGHT, WIDTH, Video


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def registry(clock):
    return SessionRegistry(idle_timeout=60, max_sessions=2, clock=clock)


def test_open_then_get_returns_the_same_session(registry):
    session = registry.open(state="engine-state")

    assert registry.get(session.id) is session
    assert session.state == "engine-state"
    assert len(registry) == 1


def test_unknown_session_is_not_found(registry):
    with pytest.raises(SessionNotFound) as error:
        registry.get("nope")

    assert error.value.code is ErrorCode.SESSION_NOT_FOUND
    assert error.value.message == "no session with id 'nope'"


def test_cap_refuses_one_more_session(registry):
    registry.open(state=1)
    registry.open(state=2)

    with pytest.raises(TooManySessions) as error:
        registry.open(state=3)

    assert error.value.code is ErrorCode.TOO_MANY_SESSIONS
    assert len(registry) == 2


def test_idle_session_expires_and_is_cancelled(registry, clock):
    session = registry.open(state=None)

    clock.now += 60.5

    assert registry.touch(session.id) is False
    assert session.cancel.is_set()
    assert len(registry) == 0


def test_touch_renews_the_idle_timeout(registry, clock):
    session = registry.open(state=None)

    clock.now += 50
    assert registry.touch(session.id) is True
    clock.now += 50

    assert registry.touch(session.id) is True


def test_expired_sessions_free_their_place_under_the_cap(registry, clock):
    registry.open(state=1)
    registry.open(state=2)

    clock.now += 61
    third = registry.open(state=3)

    assert len(registry) == 1
    assert registry.get(third.id) is third


def test_close_frees_at_once_and_cancels_a_running_propagation(registry):
    session = registry.open(state=None)

    assert registry.close(session.id) is True
    assert registry.close(session.id) is False
    assert session.cancel.is_set()
    assert registry.touch(session.id) is False


def test_closed_and_expired_sessions_are_handed_over_to_be_freed(clock):
    ended = []
    registry = SessionRegistry(idle_timeout=60, max_sessions=2, clock=clock, on_end=ended.append)
    closed, idle = registry.open(state=1), registry.open(state=2)

    registry.close(closed.id)
    clock.now += 60.5
    registry.touch("anything")  # any use sweeps the expired ones

    assert ended == [closed, idle]
    assert (closed.ended, idle.ended) == (True, True)
    assert (closed.cancel.is_set(), idle.cancel.is_set()) == (True, True)


async def frame_indexes(sessions: LocalSessions, session_id: str) -> list[int]:
    propagation = await sessions.propagation(session_id=session_id, start_frame_index=0)
    return [frame.frame_index async for frame in propagation.frames]


async def test_an_engine_failing_mid_propagation_ends_the_stream_and_keeps_the_session(
    frames, video: Video, caplog: pytest.LogCaptureFixture
) -> None:
    # given a session whose engine breaks on frame 3 of its first propagation
    state = ClassicEngine().open(frames)
    rows, columns = np.nonzero(video.masks[0][1])
    point = [columns.mean() / (WIDTH - 1), rows.mean() / (HEIGHT - 1)]
    state.add_points(frame_index=0, object_id=1, points=[point], labels=[1])
    working_track = state._track

    def breaking_track(frame_index: int, *, reverse: bool):
        if frame_index == 3:
            raise RuntimeError("the engine broke")
        return working_track(frame_index, reverse=reverse)

    state._track = breaking_track
    sessions = LocalSessions(SessionRegistry(idle_timeout=60, max_sessions=2))
    session = sessions.registry.open(state=state)
    try:
        # when it propagates
        with caplog.at_level(logging.ERROR, logger="segmentation.services.local_sessions"):
            parts = await frame_indexes(sessions, session.id)

        # then the stream holds the frames before the failure and ends; the log says why
        assert parts == [0, 1, 2]
        assert [record.getMessage() for record in caplog.records] == [
            f"propagation of session {session.id} failed after 3 frames (from frame 0)"
        ]
        assert caplog.records[0].exc_info[0] is RuntimeError
        # and the session still answers: once the engine works again, a propagation completes
        state._track = working_track
        assert await frame_indexes(sessions, session.id) == list(range(12))
    finally:
        sessions.registry.close(session.id)


def test_each_client_holds_at_most_its_share(clock):
    registry = SessionRegistry(idle_timeout=60, max_sessions=5, max_per_client=2, clock=clock)
    registry.open(state=1, client="203.0.113.1")
    registry.open(state=2, client="203.0.113.1")

    with pytest.raises(TooManyClientSessions) as error:
        registry.open(state=3, client="203.0.113.1")
    other = registry.open(state=4, client="203.0.113.2")

    assert error.value.code is ErrorCode.TOO_MANY_CLIENT_SESSIONS
    assert error.value.message == (
        "this client holds its maximum of 2 sessions; close one or try again later"
    )
    assert other.client == "203.0.113.2"
    assert len(registry) == 3


def test_held_sessions_say_who_opened_them_and_when(clock):
    registry = SessionRegistry(idle_timeout=60, max_sessions=5, max_per_client=2, clock=clock)
    first = registry.open(state=1, video_path="gallery/a.mp4", client="203.0.113.1")
    clock.now += 30
    second = registry.open(state=2, video_path="gallery/b.mp4", client="203.0.113.2")
    clock.now += 10
    registry.get(first.id)
    clock.now += 5

    held = registry.held()

    assert held == [
        HeldSession(first.id, "203.0.113.1", "gallery/a.mp4", age_sec=45, idle_sec=5),
        HeldSession(second.id, "203.0.113.2", "gallery/b.mp4", age_sec=15, idle_sec=15),
    ]
