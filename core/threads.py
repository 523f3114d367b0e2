"""Blocking iterators consumed from async code: each runs in its own thread, at its own pace.

Both services need it: the demo channels encode video in a thread, and a propagation runs the
engine in one. The thread holds whatever it took for the whole run (an engine session's lock is
released by the thread that took it); the async side reads through a bounded queue, so a slow
reader pauses the thread, and stopping (``stop`` set, or the async side closed) ends the thread
at its next item. A single result computed the same way (an export) is :func:`call_in_thread`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
Made = TypeVar("Made")
_END = object()
POLL_SECONDS = 0.5


async def iterate_in_thread(
    make_iterator: Callable[[], Iterator[Item]],
    *,
    stop: threading.Event,
    name: str,
    buffered: int = 8,
) -> AsyncIterator[Item]:
    """Yield what ``make_iterator()`` yields, computed in a new thread. An exception in the
    thread is raised here; closing this iterator sets ``stop`` and ends the thread."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue(maxsize=buffered)

    def hand_over(item: object) -> bool:
        """Put ``item`` on the queue, waiting for room; False once stopped."""
        if stop.is_set():
            return False
        coroutine = queue.put(item)
        try:
            put = asyncio.run_coroutine_threadsafe(coroutine, loop)
        except RuntimeError:  # the loop has closed: nobody reads any more
            coroutine.close()
            return False
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                put.result(timeout=POLL_SECONDS)
                return True
        put.cancel()
        return False

    def produce() -> None:
        try:
            iterator = make_iterator()
            try:
                for item in iterator:
                    if not hand_over(item):
                        return
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
        except BaseException as error:  # handed to the reader, which raises it
            hand_over(error)
            return
        hand_over(_END)

    threading.Thread(target=produce, name=name, daemon=True).start()
    try:
        while (item := await queue.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


class Stopped(Exception):
    """Raised by work that found its ``stop`` set: nobody waits for its result any more."""


async def call_in_thread(
    function: Callable[[], Result], *, stop: threading.Event, name: str
) -> Result:
    """``function()``, computed in a new thread; its exception is raised here. Cancelling the
    task that awaits it (Django cancels a view whose client hung up) sets ``stop``, which the
    function looks at between its steps (raising :class:`Stopped`), and does not wait for it,
    unlike ``sync_to_async``, which waits for its thread to finish."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Result] = loop.create_future()

    def settle(result: object, error: BaseException | None) -> None:
        if future.done():  # cancelled: nobody reads it
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        result: object = None
        error: BaseException | None = None
        try:
            result = function()
        except BaseException as failure:  # handed to the awaiting task
            error = failure
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody reads any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        return await future
    finally:
        stop.set()


class MadeOnce(Generic[Made]):
    """A process-wide object, made by ``make`` on first use, once however many threads ask at
    once: ``functools.cache`` lets threads that ask together each make their own, and two
    session registries, or two sets of engine turns, would each keep their own caps.
    ``cache_clear()`` forgets it (tests)."""

    def __init__(self, make: Callable[[], Made]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._made: Made | None = None
        self.__doc__ = make.__doc__

    def __call__(self) -> Made:
        made = self._made
        if made is None:
            with self._lock:
                if self._made is None:
                    self._made = self._make()
                made = self._made
        return made

    def cache_clear(self) -> None:
        with self._lock:
            self._made = None
