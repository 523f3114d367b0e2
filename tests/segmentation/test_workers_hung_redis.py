"""The inference workers when Redis takes connections and reads commands but never answers (a
hung server, a proxy whose backend is gone): each operation of a web process that looks at the
workers' registry fails as SERVER_BUSY within the registry's expiry, with when to come back, and
a worker told to stop drains all the same. Before, each operation waited redis-py's default
socket timeout (5 s), whatever the expiry, and failed with redis-py's own error, which a client
saw without a code; and the drain ended with that error. With Redis down, a web process that
cannot read its answers says so once, not with a traceback twice a second."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

from config.env import channel_layers_config
from loopback_fakes.hung_server import HungServer
from segmentation.errors import ServerBusy
from segmentation.services.session_types import Clicks
from segmentation.workers.client import LIVENESS_POLL_SEC, WorkerClient
from segmentation.workers.registry import WorkerRegistry, worker_info_new
from segmentation.workers.worker import WorkerRuntime

TTL_SEC = 0.5  # the registry's expiry: each Redis command's bound
HANG_SEC = 5  # past this, an operation is taken to hang
SESSION = "gpu-1-0123abcd.5f1e"  # a session of a worker the client never saw


def failed_within(call) -> tuple[BaseException | None, float]:
    """The exception ``call()`` ended with (None: it returned), and the seconds it took; a call
    still running after :data:`HANG_SEC` fails the test."""
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(call)
        try:
            running.result(HANG_SEC)
        except concurrent.futures.TimeoutError:
            pytest.fail(f"{call} still waited on Redis after {HANG_SEC} s")
        except Exception as error:  # what ended it is the result
            return error, time.monotonic() - started
    return None, time.monotonic() - started


def test_each_operation_through_the_registry_fails_as_server_busy_within_its_expiry():
    threads = threading.active_count()
    with HungServer() as hung:
        client = WorkerClient(redis_url=hung.url, prefix="hung", ttl_seconds=TTL_SEC)
        try:
            click = Clicks(0, 1, [[0.5, 0.5]], [1], clear_old_points=True)
            outcomes = {
                "open": failed_within(lambda: client.open(video_path="v.mp4", file="/v.mp4")),
                "held": failed_within(client.held),
                "ping": failed_within(lambda: client.ping(session_id=SESSION)),
                "click": failed_within(lambda: client.add_points(session_id=SESSION, clicks=click)),
            }
        finally:
            client.shutdown()
        asked = bytes(hung.received)

    # each reached Redis and failed as SERVER_BUSY, saying what and when to come back, within
    # the bound and a margin
    assert {name: type(error) for name, (error, _) in outcomes.items()} == dict.fromkeys(
        outcomes, ServerBusy
    )
    assert {(str(error), error.retry_after) for error, _ in outcomes.values()} == {
        (
            "the inference workers cannot be reached (Redis does not answer); try again in 1 s",
            1,
        )
    }
    assert all(TTL_SEC <= took < TTL_SEC + 1.0 for _, took in outcomes.values()), outcomes
    # the client's thread (its loop) and the fake's ended with them
    assert threading.active_count() == threads
    # each on a connection of its own, whose greeting went unanswered
    assert asked == b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n" * 4  # RESP3


@pytest.mark.django_db
async def test_a_worker_told_to_stop_drains_while_redis_hangs():
    # given a worker with no session, whose registry hangs
    with HungServer() as hung:
        registry = WorkerRegistry.at_url(hung.url, prefix="hung", ttl_seconds=TTL_SEC)
        info = worker_info_new(name="w", engine="classic", device="cpu", capacity=2)
        runtime = WorkerRuntime(info, registry, None, heartbeat_seconds=TTL_SEC / 4)

        # when it is told to stop
        started = time.monotonic()
        await asyncio.wait_for(runtime.drain(), HANG_SEC)
        took = time.monotonic() - started

    # then it drained, within the bound (before, it ended with Redis's error)
    assert runtime.draining
    assert TTL_SEC <= took < TTL_SEC + 1.0, took


def test_a_web_process_that_cannot_read_its_answers_says_so_once(settings, caplog):
    # given a web process's client whose channel layer's Redis is down
    settings.CHANNEL_LAYERS = channel_layers_config("redis://127.0.0.1:9/0")
    client = WorkerClient(redis_url="redis://127.0.0.1:9/0", prefix="down", ttl_seconds=TTL_SEC)

    # when it tries to read its answers for four of its retries
    time.sleep(4 * LIVENESS_POLL_SEC)
    client.shutdown()

    # then it said so once, with the traceback
    said = [r for r in caplog.records if r.name == "segmentation.workers.client"]
    assert [(r.getMessage(), r.exc_info is not None) for r in said] == [
        ("segmentation workers: reading answers failed; retrying", True)
    ]
