"""New connections per client (core/connection_admission.py), on a clock the test moves."""

from __future__ import annotations

from config.env import Rate
from core.connection_admission import OPEN_RETRY_AFTER_SEC, ConnectionAdmission, Refusal
from core.message_budget import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_says_how_long_until_its_next_token():
    clock = Clock()
    bucket = TokenBucket(Rate(2, 60), clock=clock)

    assert bucket.wait() == 0
    assert [bucket.take(), bucket.take(), bucket.take()] == [True, True, False]
    assert bucket.wait() == 30.0
    clock.now += 12
    assert bucket.wait() == 18.0
    clock.now += 18
    assert (bucket.wait(), bucket.take()) == (0, True)


def test_a_client_gets_its_burst_then_one_a_period_and_another_client_its_own():
    clock = Clock()
    admission = ConnectionAdmission(rate=Rate(3, 60), max_open=None, clock=clock)

    outcomes = [admission.admit("203.0.113.1") for _ in range(5)]
    other = admission.admit("203.0.113.2")
    clock.now += 19.5
    still = admission.admit("203.0.113.1")
    clock.now += 0.5
    again = admission.admit("203.0.113.1")

    # a refusal took nothing: the next token came 20 s after the burst, not later
    refused = Refusal("over 3/m", 20)
    assert outcomes == [None, None, None, refused, refused]
    assert other is None
    assert still == Refusal("over 3/m", 1)
    assert again is None


def test_a_client_holding_its_cap_gets_no_more_until_one_ends():
    admission = ConnectionAdmission(rate=Rate(10, 60), max_open=2, clock=Clock())

    outcomes = [admission.admit("203.0.113.1") for _ in range(3)]
    held = admission.open_count("203.0.113.1")
    admission.release("203.0.113.1")
    after = admission.admit("203.0.113.1")
    admission.release("203.0.113.1")
    admission.release("203.0.113.1")

    assert outcomes == [None, None, Refusal("2 open already", OPEN_RETRY_AFTER_SEC)]
    assert held == 2
    assert after is None
    # the refusal for the cap took no token: 3 of 10 taken
    assert [admission.admit("203.0.113.1") for _ in range(2)] == [None, None]
    assert admission.open_count("203.0.113.1") == 2


def test_a_release_of_a_client_never_counted_changes_nothing():
    admission = ConnectionAdmission(rate=None, max_open=1, clock=Clock())

    admission.release("203.0.113.1")

    assert admission.open_count("203.0.113.1") == 0
    assert admission.admit("203.0.113.1") is None
    assert admission.admit("203.0.113.1") == Refusal("1 open already", OPEN_RETRY_AFTER_SEC)


def test_the_table_of_clients_is_bounded_dropping_the_least_recently_seen():
    clock = Clock()
    admission = ConnectionAdmission(rate=Rate(1, 3600), max_open=None, max_clients=3, clock=clock)

    for client in ("a", "b", "c"):
        assert admission.admit(client) is None
    assert admission.admit("a") is not None  # seen again: now the most recent
    for number in range(1000):  # a client with many addresses
        admission.admit(f"2001:db8::{number:x}")

    assert admission.clients == 3
    # "a", "b" and "c" were dropped, and come back with a full bucket
    assert admission.admit("b") is None
