"""Turns at costly work: a few at a time, a bounded line in the order it came, refused past it
or past a waiter's own wait."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from core.turns import NoTurn, Turns, TurnTimedOut
from tests.timing import Clock, until


def take_in_turn(turns: Turns, name: str, order: list[str]) -> threading.Thread:
    """A thread that waits for a turn and notes when it got it; started once the line is one
    longer, so that the threads stand in the line in the order they were made."""

    def run() -> None:
        with turns.turn():
            order.append(name)

    return in_line(turns, run)


def in_line(turns: Turns, run: Callable[[], None]) -> threading.Thread:
    """A thread running ``run``, which waits in the line: returned once it stands there."""
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


def test_a_waiter_that_gives_up_leaves_the_line_and_the_one_behind_it_moves_up():
    clock = Clock()
    turns = Turns(parallel=1, queued=2, clock=clock)
    with turns.turn():
        clock.now += 3.0  # the last turn held: 3 s
    order: list[str] = []
    refusals: list[TurnTimedOut] = []

    def impatient() -> None:
        try:
            with turns.turn(wait=0.05):
                order.append("impatient")
        except TurnTimedOut as refused:
            refusals.append(refused)

    with turns.turn():
        giving_up = in_line(turns, impatient)
        behind = take_in_turn(turns, "behind", order)
        giving_up.join(timeout=10)
        seen = (turns.holding, turns.waiting)
    behind.join(timeout=10)

    # one holding and one waiting when it gave up, 3 s each, one at a time
    assert [(refused.retry_after, refused.wait, str(refused)) for refused in refusals] == [
        (6, 0.05, "no turn came within 0.05 s; try again in 6 s")
    ]
    assert seen == (1, 1)
    assert order == ["behind"]
    assert (turns.holding, turns.waiting) == (0, 0)


class HandOverAsTheWaitEnds:
    """A line's guard that makes the race happen every time: the second time ``thread`` takes it
    (to leave the line, its wait over; the first was to join it), ``hand_over`` runs first, which
    ends the holder's turn, giving it to ``thread``, before ``thread`` has looked."""

    def __init__(self, hand_over: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._hand_over = hand_over
        self.thread: threading.Thread | None = None
        self.taken_by_thread = 0

    def __enter__(self) -> None:
        if threading.current_thread() is self.thread:
            self.taken_by_thread += 1
            if self.taken_by_thread == 2:
                self._hand_over()
        self._lock.acquire()

    def __exit__(self, *exception: object) -> None:
        self._lock.release()


@pytest.mark.parametrize("behind", [True, False], ids=["a waiter behind", "no one behind"])
def test_a_turn_handed_to_a_waiter_just_as_it_gives_up_is_passed_on(behind: bool):
    turns = Turns(parallel=1, queued=2)
    order: list[str] = []
    end_holder, holder_in = threading.Event(), threading.Event()
    waiters: list[threading.Thread] = []

    def hold() -> None:
        with turns.turn():
            holder_in.set()
            end_holder.wait(10)

    holder = threading.Thread(target=hold, daemon=True)

    def hand_over() -> None:
        if behind:  # another waiter joins the line behind the one giving up, then the turn ends
            waiters.append(threading.Thread(target=take, args=("behind",), daemon=True))
            waiters[0].start()
            until(lambda: len(turns._line) == 2)  # the guard is not to be taken here
        end_holder.set()
        holder.join(timeout=10)

    def take(name: str, wait: float | None = None) -> None:
        try:
            with turns.turn(wait=wait):
                order.append(name)
        except TurnTimedOut:
            order.append(f"{name} gave up")

    guard = HandOverAsTheWaitEnds(hand_over)
    turns._guard = guard  # type: ignore[assignment]  # the race, made certain
    holder.start()
    holder_in.wait(10)
    giving_up = threading.Thread(target=take, args=("impatient", 0.05), daemon=True)
    guard.thread = giving_up

    giving_up.start()
    giving_up.join(timeout=10)
    for waiter in waiters:
        waiter.join(timeout=10)

    # the turn handed to the one giving up went on to the next, or back to the free ones
    assert guard.taken_by_thread == 2
    assert sorted(order) == (["behind", "impatient gave up"] if behind else ["impatient gave up"])
    assert (turns.holding, turns.waiting) == (0, 0)
    with turns.turn():
        assert (turns.holding, turns.waiting) == (1, 0)
