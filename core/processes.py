"""Work in processes of its own, beside the server's: for pure-Python work that would otherwise
hold the interpreter's lock against the event loop.

Made for the mask exports (``segmentation/services/exports.py``): converting an 8 MB file of
masks is seconds of Python, and in a thread of the server's process it held every other
request with it (issue 47: an honest click at 2.8 times its calm latency and a viewer's first
byte at 6.4 times, beside three such exports). In a process of its own it takes one core and
no lock of the server's.

- At most ``size`` children, each running one call at a time; up to ``queued`` more callers
  wait their turn in the order they came (:class:`core.turns.Turns`), and one past them is
  refused at once with :class:`core.turns.NoTurn`.
- A child starts on demand (``python -m core.processes``: it imports only what its calls
  need, not the server's modules), at a lower priority (``niceness``) and with numeric
  libraries on one thread, and serves call after call; it leaves once idle for ``idle_sec``,
  which gives its memory back to the system.
- A caller whose ``stop`` is set (its client went away) kills the child at once, whatever it
  was doing, or leaves the line if it was waiting, and gets :class:`core.threads.Stopped`; the
  next call starts another child. A child ends when the server goes (it watches its parent),
  so that no work goes on that nobody will read.
- Calls and answers travel as pickles between the server and its own children: a function
  (by its module and name), its keyword arguments, and its result or exception. A long call
  may say how far it has come (:func:`progress_report`), which the caller's ``on_progress``
  is given as it arrives (an upload's preparation, ``segmentation/services/preparations.py``).
- A child may be given a ceiling on its memory (``memory_bytes``: its address space), so that
  a call that would take more fails with :class:`MemoryError` in the child rather than taking
  the server's memory.
- A call may also be a stream (:meth:`ProcessPool.stream`), for work too long to answer whole:
  the child's function is a generator, given an iterator of items that a thread of the caller's
  reads and sends as the child asks for them, and what it yields comes back a value at a time.
  Both ways travel through the connection's socket, whose buffer is all either side holds: a
  caller that reads slowly pauses the child, and a child that reads slowly pauses the feeder.

The calls block, and are made from a thread (``call_in_thread``), never from the event loop.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any, TypeVar

from core.threads import Stopped
from core.turns import Turns

Result = TypeVar("Result")

POLL_SEC = 0.1  # how often a waiting caller looks at its stop flag
# A stream's messages (the first element of each), beside a call's (ok, value) answers.
STREAM = "stream"  # parent to child: (STREAM, function, kwargs), a stream's start
STARTED = "started"  # child to parent: the stream's start was read
ITEM = "item"  # parent to child: (ITEM, item), the next of the items fed
END = "end"  # parent to child: (END, None), no more items
YIELDED = "yielded"  # child to parent: (YIELDED, value), the next value the function yields
ONE_THREAD = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENCV_FOR_THREADS_NUM",
)
_PROJECT = Path(__file__).resolve().parents[1]


class ChildFailed(RuntimeError):
    """A child process ended without answering (killed by the system, or crashed)."""


# In a child: the connection to the server, for progress_report.
_server: Connection | None = None


def progress_report(value: Any) -> None:
    """Tell the caller how far the call has come (``value``: plain data); nothing outside a
    child."""
    if _server is not None:
        _server.send(_Progress(value))


class _Progress:
    """A call's progress, sent by the child between the call and its answer."""

    def __init__(self, value: Any) -> None:
        self.value = value


class ProcessPool:
    def __init__(
        self,
        *,
        size: int,
        queued: int,
        niceness: int,
        idle_sec: float,
        memory_bytes: int | None = None,
    ) -> None:
        self.turns = Turns(parallel=size, queued=queued)
        self._niceness = niceness
        self._idle_sec = idle_sec
        self._memory_bytes = memory_bytes
        self._idle: list[_Child] = []
        self._guard = threading.Lock()

    def call(
        self,
        function: Callable[..., Result],
        /,
        *,
        stop: threading.Event,
        on_progress: Callable[[Any], None] | None = None,
        **kwargs: Any,
    ) -> Result:
        """``function(**kwargs)`` in a child; its exception raised here. :class:`NoTurn` when
        the line is full, :class:`Stopped` once ``stop`` is set (the child killed). What the
        call reports of its progress (:func:`progress_report`) is given to ``on_progress``, in
        the caller's thread."""
        with self.turns.turn(stop=stop):
            if stop.is_set():
                raise Stopped
            child = self._take()
            try:
                try:
                    ok, value = child.ask(function, kwargs, stop=stop, on_progress=on_progress)
                except _Idle:  # it left, idle, just as it was given the call: a new one
                    child = self._start()
                    ok, value = child.ask(function, kwargs, stop=stop, on_progress=on_progress)
            except BaseException:
                child.kill()
                raise
            self._give_back(child)
        if not ok:
            raise value
        return value

    def stream(
        self,
        function: Callable[..., Iterator[Result]],
        /,
        *,
        stop: threading.Event,
        items: Iterable[Any],
        **kwargs: Any,
    ) -> Iterator[Result]:
        """What the generator ``function(items=<an iterator>, **kwargs)`` yields in a child, a
        value at a time, its exception raised here; ``items`` are read by a thread of this
        process (which closes whatever it opened, e.g. the database connection, through
        ``items``' own ``finally``) and sent as the child takes them. A generator itself: the
        turn is taken at its first value (:class:`NoTurn` then, at once, when the line is
        full), and closing it, or ``stop`` set, kills the child (:class:`Stopped` for the
        latter)."""
        with self.turns.turn(stop=stop):
            if stop.is_set():
                raise Stopped
            child = self._take()
            done = False
            try:
                try:
                    child.stream_start(function, kwargs, stop=stop)
                except _Idle:  # it left, idle, just as it was given the stream: a new one
                    child = self._start()
                    child.stream_start(function, kwargs, stop=stop)
                yield from child.streamed(items, stop=stop)
                done = True
            finally:
                if done:
                    self._give_back(child)
                else:  # stopped, closed, or failed: whatever it was doing, and its feeder, end
                    child.kill()

    def close(self) -> None:
        """End every idle child (tests; a server's children leave with it)."""
        with self._guard:
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()

    def _take(self) -> _Child:
        with self._guard:
            while self._idle:
                child = self._idle.pop()
                if child.alive():
                    return child
                child.kill()  # left, idle: reaped and its connection closed
        return self._start()

    def _start(self) -> _Child:
        return _Child.start(
            niceness=self._niceness, idle_sec=self._idle_sec, memory_bytes=self._memory_bytes
        )

    def _give_back(self, child: _Child) -> None:
        with self._guard:
            self._idle.append(child)


class _Idle(Exception):
    """The child had left, idle, before it read the call."""


class _Child:
    """One child process and the connection to it."""

    def __init__(self, process: subprocess.Popen, connection: Connection) -> None:
        self.process = process
        self._connection = connection

    @classmethod
    def start(cls, *, niceness: int, idle_sec: float, memory_bytes: int | None = None) -> _Child:
        ours, theirs = Pipe(duplex=True)
        environment = {
            **os.environ,
            **dict.fromkeys(ONE_THREAD, "1"),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(_PROJECT), os.environ.get("PYTHONPATH")])
            ),
        }
        # our own interpreter and module; only numbers from this process on its command line
        process = subprocess.Popen(  # noqa: S603
            [
                sys.executable,
                "-m",
                "core.processes",
                str(theirs.fileno()),
                str(niceness),
                repr(idle_sec),
                str(memory_bytes or 0),
                str(os.getpid()),
            ],
            pass_fds=[theirs.fileno()],
            env=environment,
            stdin=subprocess.DEVNULL,
            cwd=_PROJECT,
        )
        theirs.close()
        return cls(process, ours)

    def alive(self) -> bool:
        return self.process.poll() is None

    def ask(
        self,
        function: Callable[..., Any],
        kwargs: dict,
        *,
        stop: threading.Event,
        on_progress: Callable[[Any], None] | None = None,
    ) -> tuple[bool, Any]:
        """The child's answer to ``function(**kwargs)``: ``(True, result)`` or ``(False,
        exception)``; its progress on the way given to ``on_progress``."""
        try:
            self._connection.send((function, kwargs))
        except (BrokenPipeError, ConnectionResetError):
            raise self._gone() from None
        return self._answer(stop, on_progress)

    def stream_start(
        self, function: Callable[..., Any], kwargs: dict, *, stop: threading.Event
    ) -> None:
        """Give the child a stream, and wait until it has read it."""
        try:
            self._connection.send((STREAM, function, kwargs))
        except (BrokenPipeError, ConnectionResetError):
            raise self._gone() from None
        kind, _ = self._answer(stop)
        if kind != STARTED:
            raise ChildFailed(f"the worker process answered {kind!r} to a stream's start")

    def streamed(self, items: Iterable[Any], *, stop: threading.Event) -> Iterator[Any]:
        """The stream's values, ``items`` fed to the child from a thread meanwhile; its
        exception raised here. Only a stream that ended well leaves the child serving: any
        other end is the caller's to kill it, which ends the feeder at its next item."""
        halt = threading.Event()
        feeder = threading.Thread(
            target=self._feed, args=(items, stop, halt), name="process-feed", daemon=True
        )
        feeder.start()
        try:
            while (answer := self._answer(stop))[0] == YIELDED:
                yield answer[1]
        except BaseException:
            halt.set()
            raise
        ok, value = answer
        if not ok:
            halt.set()
            raise value
        feeder.join()  # the child reads the items to their end before it answers

    def _feed(self, items: Iterable[Any], stop: threading.Event, halt: threading.Event) -> None:
        """Send ``items`` and their end, until the child goes, or ``stop`` or ``halt`` is set."""
        iterator = iter(items)
        try:
            for item in iterator:
                if stop.is_set() or halt.is_set():
                    return
                self._connection.send((ITEM, item))
            self._connection.send((END, None))
        except OSError:  # the child was killed: nobody reads the rest
            return
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def _answer(
        self, stop: threading.Event, on_progress: Callable[[Any], None] | None = None
    ) -> tuple[Any, Any]:
        """The child's next message but its progress (given to ``on_progress``)."""
        while True:
            while not self._connection.poll(POLL_SEC):
                if stop.is_set():
                    raise Stopped
            try:
                message = self._connection.recv()
            except (EOFError, ConnectionResetError):
                raise self._gone() from None
            except Exception as error:  # an answer that does not unpickle here
                raise ChildFailed(
                    f"the worker process's answer could not be read: {error!r}"
                ) from None
            if not isinstance(message, _Progress):
                return message
            if on_progress is not None:
                on_progress(message.value)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._connection.close()

    def _gone(self) -> Exception:
        code = self.process.wait()
        self._connection.close()
        if code == 0:
            return _Idle()
        return ChildFailed(f"the worker process ended without an answer (exit status {code})")


def serve(connection: Connection, *, idle_sec: float) -> None:
    """A child's loop: answer each call, until the server hangs up or none comes for
    ``idle_sec``."""
    global _server
    _server = connection
    while connection.poll(idle_sec):
        try:
            message = connection.recv()
        except EOFError:  # the server went
            return
        if message[0] == STREAM:
            if not _stream_serve(connection, *message[1:]):
                return
            continue
        function, kwargs = message
        try:
            answer: tuple[bool, Any] = (True, function(**kwargs))
        except Exception as error:  # handed to the caller, which raises it
            answer = (False, error)
        try:
            connection.send(answer)
        except (pickle.PicklingError, TypeError, AttributeError) as error:  # nothing was sent
            connection.send((False, ChildFailed(f"the answer could not be sent back: {error!r}")))
        except OSError:  # the server went
            return


def _stream_serve(connection: Connection, function: Callable[..., Any], kwargs: dict) -> bool:
    """A stream's work in the child: what ``function`` yields sent as it comes, the items it is
    fed read to their end, then its answer. False when the child should end (the server went,
    or the stream failed and its items were left unread)."""
    connection.send((STARTED, None))

    def fed() -> Iterator[Any]:
        while True:
            kind, item = connection.recv()
            if kind == END:
                return
            yield item

    items = fed()
    try:
        for value in function(items=items, **kwargs):
            connection.send((YIELDED, value))
        for _ in items:  # the rest, unread: the connection must be clean for the next call
            pass
    except (EOFError, OSError):  # the server went
        return False
    except Exception as error:  # handed to the caller, which raises it (and kills this child)
        try:
            connection.send((False, error))
        except (pickle.PicklingError, TypeError, AttributeError):
            connection.send((False, ChildFailed(f"the stream failed: {error!r}")))
        return False
    connection.send((True, None))
    return True


def orphan_exit(parent: int) -> None:
    """End this child once its server (``parent``) is gone, checked every ``POLL_SEC``."""
    while os.getppid() == parent:
        time.sleep(POLL_SEC)
    os._exit(0)


if __name__ == "__main__":
    # by its name, not as __main__: the exceptions it sends back must unpickle in the server
    from core import processes

    descriptor, niceness, idle, memory, parent = sys.argv[1:6]
    # Gone with the server, however it goes: the call it was running would answer nobody. (Not
    # Linux's parent-death signal, which comes when the *thread* that started the child ends.)
    threading.Thread(target=processes.orphan_exit, args=(int(parent),), daemon=True).start()
    os.nice(int(niceness))
    if int(memory):
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
    processes.serve(Connection(int(descriptor)), idle_sec=float(idle))
