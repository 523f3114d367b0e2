from __future__ import annotations

import pytest

from segmentation.errors import ErrorCode, SessionNotFound, TooManySessions
from segmentation.services.sessions import SessionRegistry


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
