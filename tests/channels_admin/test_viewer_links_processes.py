"""A private viewer link's cap across two real server processes on one Redis (each process
counts the other's viewers, `streaming/shared_audience.py`): viewers on both admitted up to the
cap, the next refused on either, a place freed when one leaves, the status counting both, and a
crowd of 200 joining at once on both never admitted past the cap."""

from __future__ import annotations

import concurrent.futures
import threading
import uuid

import pytest
import redis
import requests

from loopback_fakes.ts_upstream import TsUpstream
from tests.channels_admin.stream_client import select, status, wait_until
from tests.channels_admin.test_stream_server import playlist_for
from tests.channels_admin.test_viewer_links import (
    make_link,
    refused,
    set_private,
    ts_viewer,
    viewers_of,
)
from tests.conftest import free_port, running_server
from tests.system.test_scale_out import REDIS_URL, needs_redis

pytestmark = needs_redis
LOCK_SEC = 2


def full(cap: int) -> tuple[int, str]:
    return 429, f"this link is watched by its most viewers ({cap}): try again later"


def plays(server: str) -> bool:
    """Whether ``server`` hands a /ts viewer the channel's bytes now."""
    with requests.get(f"{server}/ts", stream=True, timeout=(5, 5)) as answer:
        return answer.status_code == 200 and next(answer.iter_content(188))[0] == 0x47


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two server processes sharing a database and a Redis, the channel playing on both, the
    stream private: (one, two)."""
    tmp_path = tmp_path_factory.mktemp("links-processes")
    upstream = TsUpstream(bitrate_bps=500_000)
    playlist = tmp_path / "channels.m3u"
    playlist.write_text(playlist_for(upstream), encoding="utf-8")
    prefix = f"test-links-{uuid.uuid4().hex[:8]}"
    env = {
        "CHANNELS_PLAYLIST_PATH": str(playlist),
        "REDIS_URL": REDIS_URL,
        "CHANNELS_RELAY_PREFIX": prefix,
        "CHANNELS_RELAY_LOCK_SEC": str(LOCK_SEC),
    }
    try:
        with (
            running_server(tmp_path, port=free_port(), log_name="one.log", **env) as one,
            running_server(tmp_path, port=free_port(), log_name="two.log", **env) as two,
        ):
            status(two)  # its hub exists and listens for the switch
            select(one, "a")
            wait_until(lambda: plays(one) and plays(two), timeout=20, what="the channel on both")
            set_private(one, True)
            yield one, two
    finally:
        upstream.close()
        keys = redis.Redis.from_url(REDIS_URL)
        found = keys.keys(f"{prefix}:*")
        if found:
            keys.delete(*found)
        keys.close()


def test_a_links_cap_holds_across_two_processes(servers):
    one, two = servers
    link = make_link(one, "two processes", max_viewers=2)
    token = link["token"]

    with ts_viewer(two, token):
        with ts_viewer(one, token):
            wait_until(
                lambda: viewers_of(one, link) == viewers_of(two, link) == 2,
                what="both viewers counted by both processes",
            )
            third = [refused(one, "/ts", token), refused(two, "/ts", token)]
            counted_while_full = (viewers_of(one, link), viewers_of(two, link))
        # the first has left: its seat is given back, and a new viewer is admitted
        wait_until(lambda: viewers_of(two, link) == 1, what="the first viewer's seat given back")
        with ts_viewer(one, token):
            counted_again = viewers_of(two, link)

    assert third == [full(2), full(2)]
    assert counted_while_full == (2, 2)
    assert counted_again == 2
    wait_until(lambda: viewers_of(one, link) == 0, what="every seat given back")


CROWD = 200


def test_a_crowd_on_two_processes_is_never_admitted_past_the_cap(servers):
    one, two = servers
    link = make_link(one, "crowd", max_viewers=5)
    start = threading.Barrier(CROWD)
    answered = threading.Event()

    def viewer(n: int) -> tuple[int, str]:
        server = (one, two)[n % 2]
        start.wait()
        with requests.get(
            f"{server}/ts", params={"t": link["token"]}, stream=True, timeout=(30, 30)
        ) as answer:
            if answer.status_code != 200:
                return answer.status_code, answer.text
            # watch, as a player does (one that reads nothing is cut off, freeing its place),
            # until every viewer was answered
            for _ in answer.iter_content(65536):
                if answered.is_set():
                    return 200, ""
            return 200, "ended"

    with concurrent.futures.ThreadPoolExecutor(CROWD) as pool:
        futures = [pool.submit(viewer, n) for n in range(CROWD)]
        try:
            wait_until(
                lambda: sum(f.done() for f in futures) == CROWD - 5,
                timeout=60,
                what="the refusals",
            )
            counted = (viewers_of(one, link), viewers_of(two, link))
        finally:
            answered.set()
        answers = [f.result() for f in futures]

    assert sorted(answers) == [(200, "")] * 5 + [full(5)] * (CROWD - 5)
    assert counted == (5, 5)
    wait_until(lambda: viewers_of(two, link) == 0, what="every seat given back")
