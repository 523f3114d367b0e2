"""Turns at costly work: a few at a time, a bounded line in the order it came, refused past it."""

from __future__ import annotations

import threading
import time

import pytest

from core.turns import NoTurn, Turns


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def take_in_turn(turns: Turns, name: str, order: list[str]) -> threading.Thread:
    """A thread that waits for a turn and notes when it got it; started once the line is one
    longer, so that the threads stand in the line in the order they were made."""

    def run() -> None:
        with turns.turn():
            order.append(name)

    before = turns.waiting
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    until(lambda: turns.waiting == before + 1)
    return thread


def test_parallel_turns_are_held_at_once_without_waiting():
    clock = Clock()
    turns = Turns(parallel=2, queued=0, clock=clock)

    with turns.turn() as first, turns.turn() as second:
        holding = turns.holding

    assert (first, second, holding, turns.holding, turns.waiting) == (0, 0, 2, 0, 0)


def test_waiters_are_given_the_turn_in_the_order_they_came():
    turns = Turns(parallel=1, queued=3)
    order: list[str] = []

    with turns.turn():
        waiters = [take_in_turn(turns, name, order) for name in ("a", "b", "c")]
        seen = (turns.holding, turns.waiting, list(order))
    for waiter in waiters:
        waiter.join(timeout=10)

    assert seen == (1, 3, [])
    assert order == ["a", "b", "c"]
    assert (turns.holding, turns.waiting) == (0, 0)


def test_a_waiter_is_told_how_long_it_waited():
    clock = Clock()
    turns = Turns(parallel=1, queued=1, clock=clock)
    waited: list[float] = []

    def wait() -> None:
        with turns.turn() as seconds:
            waited.append(seconds)

    with turns.turn():
        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        until(lambda: turns.waiting == 1)
        clock.now += 2.5
    waiter.join(timeout=10)

    assert waited == [2.5]


def test_past_the_line_a_turn_is_refused_at_once_with_the_seconds_to_wait():
    clock = Clock()
    turns = Turns(parallel=1, queued=1, clock=clock)
    with turns.turn():
        clock.now += 2.5  # the last turn held: 2.5 s
    order: list[str] = []

    with turns.turn():
        waiter = take_in_turn(turns, "waiter", order)
        with pytest.raises(NoTurn) as refused, turns.turn():
            order.append("refused")
        seen = (turns.holding, turns.waiting)
    waiter.join(timeout=10)

    # one holding and one waiting, each 2.5 s, one at a time
    assert (refused.value.retry_after, str(refused.value)) == (5, "no turn free; try again in 5 s")
    assert seen == (1, 1)
    assert order == ["waiter"]


def test_the_first_refusal_guesses_a_second_a_turn():
    turns = Turns(parallel=2, queued=0)

    with turns.turn(), turns.turn(), pytest.raises(NoTurn) as refused, turns.turn():
        pass

    assert refused.value.retry_after == 1  # 2 holding, 1 s each (a guess), 2 at a time


def test_a_turn_ended_by_an_error_passes_on():
    turns = Turns(parallel=1, queued=1)
    order: list[str] = []

    waiters: list[threading.Thread] = []

    def fail() -> None:
        with turns.turn():
            waiters.append(take_in_turn(turns, "waiter", order))
            raise ValueError("the hash failed")

    with pytest.raises(ValueError, match="the hash failed"):
        fail()
    waiters[0].join(timeout=10)

    assert order == ["waiter"]
    assert (turns.holding, turns.waiting) == (0, 0)
