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
  was doing, and gets :class:`core.threads.Stopped`; the next call starts another child.
- Calls and answers travel as pickles between the server and its own children: a function
  (by its module and name), its keyword arguments, and its result or exception.

The calls block, and are made from a thread (``call_in_thread``), never from the event loop.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any, TypeVar

from core.threads import Stopped
from core.turns import Turns

Result = TypeVar("Result")

POLL_SEC = 0.1  # how often a waiting caller looks at its stop flag
ONE_THREAD = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENCV_FOR_THREADS_NUM",
)
_PROJECT = Path(__file__).resolve().parents[1]


class ChildFailed(RuntimeError):
    """A child process ended without answering (killed by the system, or crashed)."""


class ProcessPool:
    def __init__(self, *, size: int, queued: int, niceness: int, idle_sec: float) -> None:
        self.turns = Turns(parallel=size, queued=queued)
        self._niceness = niceness
        self._idle_sec = idle_sec
        self._idle: list[_Child] = []
        self._guard = threading.Lock()

    def call(
        self, function: Callable[..., Result], /, *, stop: threading.Event, **kwargs: Any
    ) -> Result:
        """``function(**kwargs)`` in a child; its exception raised here. :class:`NoTurn` when
        the line is full, :class:`Stopped` once ``stop`` is set (the child killed)."""
        with self.turns.turn():
            if stop.is_set():
                raise Stopped
            child = self._take()
            try:
                try:
                    ok, value = child.ask(function, kwargs, stop=stop)
                except _Idle:  # it left, idle, just as it was given the call: a new one
                    child = _Child.start(niceness=self._niceness, idle_sec=self._idle_sec)
                    ok, value = child.ask(function, kwargs, stop=stop)
            except BaseException:
                child.kill()
                raise
            self._give_back(child)
        if not ok:
            raise value
        return value

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
        return _Child.start(niceness=self._niceness, idle_sec=self._idle_sec)

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
    def start(cls, *, niceness: int, idle_sec: float) -> _Child:
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
        self, function: Callable[..., Any], kwargs: dict, *, stop: threading.Event
    ) -> tuple[bool, Any]:
        """The child's answer to ``function(**kwargs)``: ``(True, result)`` or ``(False,
        exception)``."""
        try:
            self._connection.send((function, kwargs))
        except (BrokenPipeError, ConnectionResetError):
            raise self._gone() from None
        while not self._connection.poll(POLL_SEC):
            if stop.is_set():
                raise Stopped
        try:
            return self._connection.recv()
        except (EOFError, ConnectionResetError):
            raise self._gone() from None
        except Exception as error:  # an answer that does not unpickle here
            raise ChildFailed(f"the worker process's answer could not be read: {error!r}") from None

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
    while connection.poll(idle_sec):
        try:
            function, kwargs = connection.recv()
        except EOFError:  # the server went
            return
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


if __name__ == "__main__":
    # by its name, not as __main__: the exceptions it sends back must unpickle in the server
    from core import processes

    descriptor, niceness, idle = sys.argv[1:4]
    os.nice(int(niceness))
    processes.serve(Connection(int(descriptor)), idle_sec=float(idle))
