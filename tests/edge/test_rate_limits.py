"""Per-client rate limits on the cost of mutations and propagations, and on uploads, on the real
server: over its limit a client is answered 429 with ``Retry-After`` before its request runs,
and other clients are not affected (issue 36, finding 2)."""

from __future__ import annotations

import functools
import json
import time

import pytest
import requests
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured

from config.env import CACHE_TIMEOUT_SEC, Rate, caches_config, env_rate
from core import cache_outage
from core.rate_limits import CostMeter, rate_limit_capped, rate_limit_wait
from loopback_fakes.hung_server import HungServer
from tests.conftest import running_server
from tests.segmentation.synthetic import make_video, write_mp4
from tests.segmentation.test_graphql_cost import aliased_clicks

# Clients behind the trusted proxy (loopback, by default): each address counts on its own.
ONE = {"X-Forwarded-For": "198.51.100.1"}
TWO = {"X-Forwarded-For": "198.51.100.2"}
DELETION_ID = {"query": "mutation { createDeletionId }"}
UPLOAD = "mutation($file: Upload!) { uploadVideo(file: $file) { path } }"


def refusal(what: str, wait: int) -> dict:
    message = f"this client sent more than its limit of {what}; try again in {wait} s"
    return {"errors": [{"message": message, "extensions": {"code": "RATE_LIMITED"}}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with running_server(
        tmp_path_factory.mktemp("rate-limits"),
        RATE_LIMIT_COST="3/h",
    ) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def upload_server(tmp_path_factory: pytest.TempPathFactory):
    with running_server(
        tmp_path_factory.mktemp("upload-limits"), RATE_LIMIT_COST="", RATE_LIMIT_UPLOADS="1/h"
    ) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def within_one_window():
    """The limits count in fixed hourly windows: start well inside one."""
    left = 3600 - time.time() % 3600
    if left < 30:
        time.sleep(left + 1)


def test_a_client_over_its_limit_waits_and_the_others_do_not(server):
    within = [
        requests.post(f"{server}/graphql", json=DELETION_ID, headers=ONE, timeout=30)
        for _ in range(3)
    ]

    over = requests.post(f"{server}/graphql", json=DELETION_ID, headers=ONE, timeout=30)
    query = requests.post(
        f"{server}/graphql",
        json={"query": "{ defaultVideo { path } }"},
        headers={**ONE, "Origin": "http://localhost:7262"},
        timeout=30,
    )
    propagation = requests.post(
        f"{server}/propagate_in_video", json={"session_id": "x"}, headers=ONE, timeout=30
    )
    other = requests.post(f"{server}/graphql", json=DELETION_ID, headers=TWO, timeout=30)

    assert [answer.status_code for answer in within] == [200, 200, 200]
    wait = int(over.headers["Retry-After"])
    assert 0 < wait <= 3600
    assert (over.status_code, over.json()) == (429, refusal("work", wait))
    # once over, every request to the endpoint waits (it is refused before it is parsed),
    # and a page CORS allows can read why
    assert (query.status_code, query.json()) == (
        429,
        refusal("work", int(query.headers["Retry-After"])),
    )
    assert query.headers["Access-Control-Allow-Origin"] == "http://localhost:7262"
    assert propagation.status_code == 429
    assert 0 < int(propagation.headers["Retry-After"]) <= 3600
    assert propagation.json() == {
        "error": "this client sent more than its limit of work; try again in "
        f"{propagation.headers['Retry-After']} s",
        "code": "RATE_LIMITED",
    }
    # another client is not limited
    assert other.status_code == 200
    assert set(other.json()["data"]) == {"createDeletionId"}


def test_work_refused_for_its_cost_counts_against_the_client(server):
    client = {"X-Forwarded-For": "198.51.100.4"}
    query, variables = aliased_clicks(10, 100)

    refused = requests.post(
        f"{server}/graphql",
        json={"query": query, "variables": variables},
        headers=client,
        timeout=30,
    )
    then = requests.post(f"{server}/graphql", json=DELETION_ID, headers=client, timeout=30)

    assert refused.status_code == 400
    assert refused.json()["errors"][0]["extensions"] == {"code": "QUERY_TOO_COMPLEX"}
    assert (then.status_code, then.json()) == (
        429,
        refusal("work", int(then.headers["Retry-After"])),
    )


def test_uploads_have_their_own_limit(upload_server, tmp_path):
    server = upload_server
    source = write_mp4(make_video(6), tmp_path / "clip.mp4").read_bytes()
    headers = {"X-Forwarded-For": "198.51.100.3"}

    def upload(query: str = UPLOAD) -> requests.Response:
        return requests.post(
            f"{server}/graphql",
            files={
                "operations": (None, json.dumps({"query": query, "variables": {"file": None}})),
                "map": (None, json.dumps({"1": ["variables.file"]})),
                "1": ("clip.mp4", source, "video/mp4"),
            },
            headers=headers,
            timeout=60,
        )

    first, second = upload(), upload()
    # an upload spread from a fragment is one too
    third = upload(
        "mutation($file: Upload!) { ...U } "
        "fragment U on Mutation { uploadVideo(file: $file) { path } }"
    )

    assert first.json()["data"]["uploadVideo"]["path"].startswith("uploads/")
    for refused in (second, third):
        assert (refused.status_code, refused.json()) == (
            429,
            refusal("uploads", int(refused.headers["Retry-After"])),
        )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("120/m", Rate(120, 60)),
        (" 5/s ", Rate(5, 1)),
        ("60/h", Rate(60, 3600)),
        ("1/d", Rate(1, 86400)),
        ("", None),
        ("0", None),
        ("0/m", None),
    ],
)
def test_rates_are_read_from_the_environment(raw, expected):
    assert env_rate("RATE", "1/s", environ={"RATE": raw}) == expected


@pytest.mark.parametrize("raw", ["120", "fast", "1/w", "-1/m", "1.5/s"])
def test_a_malformed_rate_is_a_start_up_error(raw):
    with pytest.raises(ImproperlyConfigured) as error:
        env_rate("RATE_LIMIT_MUTATIONS", "1/s", environ={"RATE_LIMIT_MUTATIONS": raw})

    assert str(error.value) == (
        f"RATE_LIMIT_MUTATIONS must be a rate such as 120/m (per s, m, h or d), got {raw!r}"
    )


@pytest.fixture
def outage(monkeypatch):
    """The cache's outage as this test leaves it is forgotten after it (the other tests of this
    process count in its memory); the outages last :data:`OUTAGE_SEC`."""
    monkeypatch.setattr(cache_outage, "_away_until", 0.0)
    monkeypatch.setattr(cache_outage, "OUTAGE_SEC", OUTAGE_SEC)


OUTAGE_SEC = 1.5


def test_a_cache_that_cannot_be_reached_limits_nothing_and_is_not_asked_for_a_while(
    settings, caplog, outage
):
    # given a Redis cache on a port where nothing listens
    settings.CACHES = caches_config("redis://127.0.0.1:9/0")
    look = functools.partial(rate_limit_wait, address="198.51.100.9", kind="cost", rate=Rate(1, 60))
    meter = CostMeter(address="198.51.100.9", kind="cost", rate=Rate(1, 60))
    try:
        # when a client is counted three times, then steps of an import, then once after the
        # outage
        waits = [look(), look(), look(), meter.take(1), meter.take(1)]
        time.sleep(OUTAGE_SEC)
        waits.append(look())
    finally:
        caches["default"].close()

    # then it is let through each time, and the cache was asked the first time and after
    assert waits == [None] * 6
    assert [record.getMessage().split(":")[0] for record in caplog.records] == [
        "rate limit cost not counted"
    ] * 2
    assert caplog.records[0].getMessage().endswith("(the cache is not asked for 1.5 s)")


def test_a_cache_that_hangs_costs_one_timeout_an_outage(settings, outage):
    # given a Redis cache that takes connections and never answers
    look = functools.partial(rate_limit_wait, address="198.51.100.9", kind="cost", rate=Rate(1, 60))

    def timed() -> float:
        started = time.monotonic()
        assert look() is None
        return time.monotonic() - started

    with HungServer() as hung:
        settings.CACHES = caches_config(hung.url)
        try:
            # when a client is counted five times, and again after the outage
            took = [timed() for _ in range(5)]
            time.sleep(OUTAGE_SEC)
            took.append(timed())
        finally:
            caches["default"].close()
        asked = bytes(hung.received)

    # then the first waited the cache's timeout, the next four not at all, the one after it again
    # (each asking on a connection of its own, whose greeting went unanswered)
    assert CACHE_TIMEOUT_SEC <= took[0] < CACHE_TIMEOUT_SEC + 1.0, took
    assert CACHE_TIMEOUT_SEC <= took[5] < CACHE_TIMEOUT_SEC + 1.0, took
    assert max(took[1:5]) < 0.1, took
    assert asked == b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n" * 2


def test_a_step_is_charged_only_if_it_fits_and_can_be_given_back():
    # given a limit of 10 an hour, each step charged at most 5
    meter = CostMeter(address="198.51.100.10", kind="cost", rate=Rate(10, 3600))
    look = functools.partial(
        rate_limit_wait, address="198.51.100.10", kind="cost", rate=Rate(10, 3600), weight=0
    )

    # when steps of 4, 9 (charged 5) and 4 are taken, and the last given back
    taken = [meter.take(4), meter.take(9)]
    refused = meter.take(4)  # 13 would be over: nothing is counted
    assert look() is None  # 9 counted, not 13
    meter.give_back()  # the 5 of the step taken last
    again = [meter.take(4), meter.take(4)]  # 8, then 12: refused

    # then
    assert taken == [None, None]
    assert 0 < (refused or 0) <= 3600
    assert [wait is None for wait in again] == [True, False]
    assert rate_limit_capped(9, rate=Rate(10, 3600)) == 5
    assert rate_limit_capped(9, rate=None) == 9
