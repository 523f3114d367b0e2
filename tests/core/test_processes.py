"""Work in processes of its own: real children, the calls and answers that travel between them,
the stop that kills one, the line that refuses, and what a child leaves behind."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from core.processes import ChildFailed, ProcessPool
from core.threads import Stopped
from core.turns import NoTurn
from segmentation.annotation_check import frames_check
from segmentation.errors import BadUserInput
from segmentation.rle import rle_encode
from segmentation.services.coco_instances import coco_instances_build
from segmentation.services.exports import export_build
from segmentation.video_shape import VideoShape
from tests.core.process_calls import busy, crash, doubled, failing, modules_loaded, niceness
from tests.timing import until


@pytest.fixture
def pool() -> Iterator[ProcessPool]:
    pool = ProcessPool(size=1, queued=1, niceness=5, idle_sec=30)
    yield pool
    pool.close()


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended and been reaped (a zombie still has its /proc entry)."""
    return not Path(f"/proc/{pid}").exists()


def test_a_call_is_answered_by_a_child_which_then_serves_the_next(pool):
    stop = threading.Event()

    first = pool.call(os.getpid, stop=stop)
    second = pool.call(os.getpid, stop=stop)

    assert first != os.getpid()
    assert second == first


def test_the_child_runs_below_the_server_with_numeric_libraries_on_one_thread(pool):
    stop = threading.Event()

    assert pool.call(niceness, stop=stop) == min(19, os.nice(0) + 5)
    assert pool.call(os.getenv, stop=stop, key="OMP_NUM_THREADS") == "1"
    assert pool.call(os.getenv, stop=stop, key="OPENBLAS_NUM_THREADS") == "1"


def test_the_functions_exception_is_raised_in_the_caller_and_the_child_goes_on(pool):
    stop = threading.Event()
    pid = pool.call(os.getpid, stop=stop)

    with pytest.raises(BadUserInput) as raised:
        pool.call(
            frames_check,
            stop=stop,
            data={"frames": [{"frame_index": 7, "objects": []}]},
            video=VideoShape(name="clip.mp4", width=4, height=4, frame_count=5),
        )

    assert raised.value.message == "frames[0].frame_index must be within 0..4, got 7"
    assert pool.call(os.getpid, stop=stop) == pid


def test_a_stop_kills_the_child_at_once_and_the_next_call_gets_a_new_one(pool):
    stop = threading.Event()
    pid = pool.call(os.getpid, stop=stop)
    threading.Timer(0.3, stop.set).start()

    began = time.monotonic()
    with pytest.raises(Stopped):
        pool.call(busy, stop=stop, seconds=30)

    assert time.monotonic() - began < 5
    assert gone(pid)
    again = threading.Event()
    assert pool.call(os.getpid, stop=again) not in (pid, os.getpid())


def test_a_child_that_dies_without_answering_is_a_failure_and_is_replaced(pool):
    stop = threading.Event()
    pid = pool.call(os.getpid, stop=stop)

    with pytest.raises(ChildFailed) as raised:
        pool.call(crash, stop=stop, status=3)

    assert str(raised.value) == "the worker process ended without an answer (exit status 3)"
    assert gone(pid)
    assert pool.call(os.getpid, stop=stop) != pid


def test_an_answer_that_cannot_travel_is_a_failure_and_the_child_goes_on(pool):
    stop = threading.Event()
    pid = pool.call(os.getpid, stop=stop)

    with pytest.raises(ChildFailed) as raised:
        pool.call(threading.Lock, stop=stop)

    assert str(raised.value) == (
        "the answer could not be sent back: TypeError(\"cannot pickle '_thread.lock' object\")"
    )
    assert pool.call(os.getpid, stop=stop) == pid


def test_past_the_line_a_call_is_refused_at_once():
    pool = ProcessPool(size=1, queued=1, niceness=5, idle_sec=30)
    stop = threading.Event()
    try:
        pool.call(os.getpid, stop=stop)  # the child started: the turns below are quick to take
        holder = threading.Thread(
            target=pool.call, args=(busy,), kwargs={"stop": stop, "seconds": 2}
        )
        waiter = threading.Thread(target=pool.call, args=(os.getpid,), kwargs={"stop": stop})
        holder.start()
        until(lambda: pool.turns.holding == 1)
        waiter.start()
        until(lambda: pool.turns.waiting == 1)

        began = time.monotonic()
        with pytest.raises(NoTurn):
            pool.call(os.getpid, stop=stop)

        assert time.monotonic() - began < 0.5
        holder.join(10)
        waiter.join(10)
        assert (pool.turns.holding, pool.turns.waiting) == (0, 0)
    finally:
        stop.set()
        pool.close()


def test_an_idle_child_leaves_and_the_next_call_starts_another():
    pool = ProcessPool(size=1, queued=0, niceness=5, idle_sec=0.2)
    stop = threading.Event()
    try:
        pid = pool.call(os.getpid, stop=stop)
        until(lambda: not Path(f"/proc/{pid}/stat").exists() or zombie(pid))

        again = pool.call(os.getpid, stop=stop)

        assert again != pid
        assert gone(pid)  # reaped when the pool found it gone
    finally:
        pool.close()


def test_an_exports_child_imports_no_database_engine_or_server(pool):
    stop = threading.Event()
    data = {
        "video": "clip.mp4",
        "frames": [
            {
                "frame_index": 1,
                "objects": [{"object_id": 3, "mask": rle_encode(np.eye(2, dtype=bool))}],
            }
        ],
    }
    video = VideoShape(name="clip.mp4", width=2, height=2, frame_count=2)

    name, content = pool.call(
        export_build, stop=stop, build=coco_instances_build, data=data, video=video
    )

    assert (name, content) == coco_instances_build(video=video, data=data)
    assert name == "clip-coco.json"
    loaded = pool.call(
        modules_loaded,
        stop=stop,
        prefixes=(
            "django.db",
            "django.apps",
            "config",
            "edge",
            "torch",
            "channels",
            "graphene",
            "daphne",
        ),
    )
    assert loaded == []


def zombie(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_stream_yields_what_the_childs_generator_yields_of_the_items_it_is_fed(pool):
    stop = threading.Event()

    first = list(pool.stream(doubled, stop=stop, items=range(5), times=3))
    pid = pool.call(os.getpid, stop=stop)
    second = list(pool.stream(doubled, stop=stop, items=iter([7]), times=1))

    assert (first, second) == ([0, 3, 6, 9, 12], [7])
    assert pool.call(os.getpid, stop=stop) == pid  # one child served them all


def test_a_failing_stream_raises_in_the_caller_and_its_child_is_killed(pool):
    stop = threading.Event()
    pid = pool.call(os.getpid, stop=stop)
    values = pool.stream(failing, stop=stop, items=range(10**9), after=2)
    assert [next(values), next(values)] == [0, 1]

    with pytest.raises(ValueError, match="failed after 2"):
        next(values)

    assert gone(pid)
    assert pool.call(os.getpid, stop=stop) != pid


def test_a_stream_whose_stop_is_set_kills_its_child_at_once(pool):
    stop = threading.Event()
    pid = pool.call(os.getpid, stop=stop)
    values = pool.stream(doubled, stop=stop, items=itertools.count(), times=1)
    assert next(values) == 0

    stop.set()

    with pytest.raises(Stopped):
        list(values)
    assert gone(pid)
    assert pool.turns.holding == 0
