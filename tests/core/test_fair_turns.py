"""Turns shared fairly between clients: the least served lately first, ties in the order they
came, a bounded line, waiters that leave, holders that give way between steps."""

from __future__ import annotations

import math
import threading

import pytest

from core.fair_turns import FairTurns
from core.threads import Stopped
from core.turns import NoTurn
from tests.timing import Clock, until


def served(turns: FairTurns, clock: Clock, client: str, seconds: float) -> None:
    """``client`` holds a turn for ``seconds`` (of the fake clock)."""
    with turns.turn(client):
        clock.now += seconds


def wait_in_line(
    turns: FairTurns, client: str, order: list[str], *, gone=None, errors: list | None = None
) -> threading.Thread:
    """A thread that waits for a turn for ``client`` and notes when it got it; started once the
    line is one longer, so that the threads stand in the line in the order they were made."""

    def run() -> None:
        try:
            with turns.turn(client, gone=gone):
                order.append(client)
        except (NoTurn, Stopped) as error:
            if errors is None:
                raise
            errors.append(error)

    before = turns.waiting
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    until(lambda: turns.waiting == before + 1)
    return thread


def test_turns_are_held_at_once_up_to_parallel_and_charged_to_their_client():
    clock = Clock()
    turns = FairTurns(parallel=2, queued=0, queued_per_client=0, clock=clock)

    with turns.turn("a") as first, turns.turn("b") as second:
        clock.now += 1.5
        during = (turns.holding, turns.waiting, turns.attained("a"), first.held)
    after = (turns.holding, turns.attained("a"), turns.attained("b"), second.held)

    assert (first.waited, second.waited) == (0.0, 0.0)
    assert during == (2, 0, 1.5, 1.5)  # a turn running counts as it runs
    assert after == (0, 1.5, 1.5, 1.5)


def test_the_free_turn_goes_to_the_client_least_served_lately_ties_in_arrival_order():
    clock = Clock()
    turns = FairTurns(parallel=1, queued=8, queued_per_client=8, clock=clock)
    served(turns, clock, "heavy", 3.0)
    served(turns, clock, "light", 0.5)
    order: list[str] = []

    with turns.turn("holder"):
        # the line in the order they came: heavy, light, new, other-new, light again
        waiters = [
            wait_in_line(turns, client, order)
            for client in ("heavy", "light", "new", "other-new", "light")
        ]
        seen = (turns.holding, turns.waiting, list(order))
    for waiter in waiters:
        waiter.join(timeout=10)

    assert seen == (1, 5, [])
    # the two never served first, in the order they came; then light's two (0.5 s: the
    # waiters' turns take no time on this clock) in the order they came; then heavy (3 s)
    assert order == ["new", "other-new", "light", "light", "heavy"]
    assert (turns.holding, turns.waiting) == (0, 0)


def test_service_decays_by_1_over_e_every_memory_seconds():
    clock = Clock()
    turns = FairTurns(parallel=1, queued=2, queued_per_client=2, memory=10.0, clock=clock)
    served(turns, clock, "earlier", 4.0)
    clock.now += 20.0
    served(turns, clock, "lately", 1.0)

    # earlier's 4 s, 21 s ago, count for 4 / e^2.1 = 0.49 s; lately's 1 s for 1 s
    assert turns.attained("earlier") == 4.0 * math.exp(-21.0 / 10.0)
    assert turns.attained("lately") == 1.0
    order: list[str] = []
    with turns.turn("holder"):
        waiters = [wait_in_line(turns, client, order) for client in ("lately", "earlier")]
    for waiter in waiters:
        waiter.join(timeout=10)

    assert order == ["earlier", "lately"]


def test_a_full_line_refuses_at_once_with_the_seconds_to_wait():
    clock = Clock()
    turns = FairTurns(parallel=1, queued=3, queued_per_client=2, clock=clock)
    served(turns, clock, "x", 2.0)  # the running mean of turns: 0.2 x 2 s + 0.8 x 1 s (a guess)
    order: list[str] = []

    with turns.turn("holder"):
        waiters = [wait_in_line(turns, client, order) for client in ("a", "a", "b")]
        with pytest.raises(NoTurn) as per_client, turns.turn("a"):
            order.append("a refused")
        with pytest.raises(NoTurn) as in_all, turns.turn("c"):
            order.append("c refused")
        seen = (turns.holding, turns.waiting)
    for waiter in waiters:
        waiter.join(timeout=10)

    # one holding and three waiting, 1.2 s each, one at a time: 4.8 s
    assert (per_client.value.retry_after, in_all.value.retry_after) == (5, 5)
    assert str(in_all.value) == "no turn free; try again in 5 s"
    assert seen == (1, 3)
    assert order == ["a", "a", "b"]  # none served yet: in the order they came


def test_work_under_way_rejoins_a_full_line():
    turns = FairTurns(parallel=1, queued=1, queued_per_client=1)
    order: list[str] = []

    def admitted() -> None:
        with turns.turn("a", admitted=True):
            order.append("a admitted")

    with turns.turn("holder"):
        waiter = wait_in_line(turns, "a", order)
        with pytest.raises(NoTurn):
            turns.check_room("a")
        later = threading.Thread(target=admitted, daemon=True)
        later.start()
        until(lambda: turns.waiting == 2)
    waiter.join(timeout=10)
    later.join(timeout=10)

    assert order == ["a", "a admitted"]
    turns.check_room("a")  # free: nothing raised


def test_a_waiter_whose_client_went_away_leaves_the_line():
    turns = FairTurns(parallel=1, queued=4, queued_per_client=4)
    order: list[str] = []
    errors: list[Exception] = []
    gone = threading.Event()

    with turns.turn("holder"):
        leaving = wait_in_line(turns, "leaving", order, gone=gone.is_set, errors=errors)
        staying = wait_in_line(turns, "staying", order)
        gone.set()
        leaving.join(timeout=10)
        seen = (turns.holding, turns.waiting)
    staying.join(timeout=10)

    assert seen == (1, 1)
    assert [type(error) for error in errors] == [Stopped]
    assert str(errors[0]) == "leaving went away while waiting for a turn"
    assert order == ["staying"]
    assert (turns.holding, turns.waiting) == (0, 0)


def test_a_holder_gives_way_between_steps_to_a_client_served_less_and_carries_on():
    clock = Clock()
    turns = FairTurns(parallel=1, queued=4, queued_per_client=4, clock=clock)
    order: list[str] = []
    waited: list[float] = []

    def click() -> None:
        with turns.turn("person") as turn:
            clock.now += 0.25
            order.append("person")
            waited.append(turn.waited)

    with turns.turn("greedy") as turn:
        clock.now += 1.0
        order.append("greedy step 1")
        person = threading.Thread(target=click, daemon=True)
        person.start()
        until(lambda: turns.waiting == 1)
        clock.now += 0.5  # the rest of the step the person came in
        turn.step()
        order.append("greedy step 2")
        turn.step()  # nobody waits: straight on
        order.append("greedy step 3")
        held = turn.held
    person.join(timeout=10)

    assert order == ["greedy step 1", "person", "greedy step 2", "greedy step 3"]
    assert waited == [0.5]
    assert held == 1.5  # its wait for the person's 0.25 s left out
    # its 1.5 s as of the step, decayed over the person's 0.25 s
    assert turns.attained("greedy") == 1.5 * math.exp(-0.25 / 10.0)
    assert turns.attained("person") == 0.25


def test_a_holder_keeps_its_turn_between_steps_when_no_waiter_is_due_before_it():
    clock = Clock()
    turns = FairTurns(parallel=1, queued=4, queued_per_client=4, clock=clock)
    served(turns, clock, "heavier", 5.0)
    order: list[str] = []

    with turns.turn("light") as turn:
        clock.now += 1.0
        waiters = [wait_in_line(turns, client, order) for client in ("heavier", "light")]
        turn.step()  # heavier has more, and its own client's next came later
        order.append("light step 2")
    for waiter in waiters:
        waiter.join(timeout=10)

    assert order == ["light step 2", "light", "heavier"]
