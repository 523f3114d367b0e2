"""task_cancel: the task is cancelled and awaited, the caller's own cancellation not lost; and a
loop that checks stops though ``asyncio.wait_for`` (as redis-py calls it) lost the request."""

from __future__ import annotations

import asyncio

import pytest

from core.cancellation import cancellation_check, task_cancel


async def slow_to_end(ended: list[str]) -> None:
    """A task whose cancellation takes a while to finish (it closes something)."""
    try:
        await asyncio.sleep(60)
    finally:
        await asyncio.sleep(0.05)
        ended.append("inner")


async def test_the_task_is_cancelled_and_awaited() -> None:
    ended: list[str] = []
    inner = asyncio.create_task(slow_to_end(ended))
    await asyncio.sleep(0)

    await task_cancel(inner)

    assert (inner.cancelled(), ended) == (True, ["inner"])
    await task_cancel(None)  # nothing to do


async def test_a_caller_cancelled_while_it_waits_is_cancelled_and_goes_no_further() -> None:
    # given a caller in the middle of cancelling a task that is slow to end, as the hub's
    # reader was when a channel switch cancelled it
    ended: list[str] = []
    went_on = asyncio.Event()
    started: list[asyncio.Task] = []

    async def caller() -> None:
        inner = asyncio.create_task(slow_to_end(ended))
        started.append(inner)
        await asyncio.sleep(0)
        await task_cancel(inner)
        went_on.set()  # with the CancelledError swallowed, the caller went on from here
        await asyncio.sleep(60)

    outer = asyncio.create_task(caller())
    await asyncio.sleep(0.01)

    # when the caller is cancelled meanwhile
    outer.cancel()

    # then it ends, cancelled, and the task it was cancelling ends as it would have
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(outer, 5)
    assert (outer.cancelled(), went_on.is_set()) == (True, False)
    await asyncio.wait(started, timeout=5)
    assert (started[0].cancelled(), ended) == (True, ["inner"])


async def test_a_loop_stops_at_its_check_though_wait_for_lost_the_cancellation() -> None:
    # given a loop awaiting one command after another through wait_for, as the hub's relay loop
    # awaits redis-py's
    loop = asyncio.get_running_loop()
    commands: list[asyncio.Future] = []

    async def looping() -> None:
        while True:
            cancellation_check()
            commands.append(loop.create_future())
            await asyncio.wait_for(commands[-1], 5)

    task = asyncio.create_task(looping())
    await asyncio.sleep(0)

    # when it is cancelled just as its command ends (Python 3.11's wait_for then returns the
    # result: CPython gh-86296)
    def at_once() -> None:
        commands[-1].set_result(None)
        task.cancel()

    loop.call_soon(at_once)

    # then it stops before its next command
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert len(commands) == 1


async def test_a_task_that_loses_its_cancellation_is_asked_again() -> None:
    # given a task whose loop swallows one cancellation, as a library's may
    laps: list[int] = []

    async def deaf_once() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            laps.append(1)  # lost here, once
        await asyncio.sleep(60)

    task = asyncio.create_task(deaf_once())
    await asyncio.sleep(0)

    # when it is cancelled
    await asyncio.wait_for(task_cancel(task), 5)

    # then it was asked again and has ended
    assert (task.cancelled(), laps) == (True, [1])
