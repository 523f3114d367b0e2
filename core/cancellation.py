"""Cancelling a task and waiting for it to end, without swallowing the caller's own
cancellation.

The usual ``task.cancel()`` then ``with suppress(CancelledError): await task`` swallows every
CancelledError raised at that ``await``: the task's own, as meant, but also the one meant for the
caller, when the caller is cancelled while it waits (its ``cancel()`` cancels the task it awaits,
and the error comes back through the same ``await``). The caller then goes on as if nothing had
happened, and whoever cancelled it waits for it forever: a channel switch hung so while the hub's
reader, cancelled, was itself waiting for its failover loop to end. And a task may never see its
cancellation at all when a library's loop loses it (Python 3.11's ``wait_for``, which redis-py
wraps every command in): so the request is made again until the task has ended.
"""

from __future__ import annotations

import asyncio

RECANCEL_SEC = 0.5  # how often a task that has not ended is asked again


async def task_cancel(task: asyncio.Task | None) -> None:
    """Cancel ``task`` (if any) and wait until it has ended, asking again every
    :data:`RECANCEL_SEC` while it has not (a library's loop may lose the request: see
    :func:`cancellation_check`); a cancellation of the caller while it waits is raised, not
    swallowed, as is the task's own failure (as awaiting it would)."""
    if task is None:
        return
    task.cancel()
    while not task.done():
        await asyncio.wait({task}, timeout=RECANCEL_SEC)
        task.cancel()
    if not task.cancelled():
        task.result()


def cancellation_check() -> None:
    """Raise CancelledError if the current task has been asked to cancel: for loops whose awaits
    may lose the request. Python 3.11's ``asyncio.wait_for``, which redis-py wraps every command
    in, returns the result instead of raising when the cancellation comes as the command ends
    (CPython gh-86296, fixed in 3.12): the loop would go on, and its canceller wait forever."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
