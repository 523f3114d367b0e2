"""Turns at work that takes a core for a while: a few at a time, a bounded line of waiters in the
order they came, and a refusal, with the seconds to wait, past it.

Made for the admin's password checks (``config/admin_login.py``), which run outside the
interpreter's lock, each taking a core for about 0.3 s: run all at once, a burst of them left the
event loop a small share of the cores, and every other request waited with it (issue 47).

A waiter holds its thread (the request's own) while it waits, and nothing else; the line's
bound bounds those threads and the wait, so there is no time-out.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator


class NoTurn(Exception):
    """The line is full; ``retry_after``: the seconds until it has likely made room."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"no turn free; try again in {retry_after} s")
        self.retry_after = retry_after


class Turns:
    """At most ``parallel`` holders at once and ``queued`` more waiting, served in the order
    they came: a turn given up passes to the first waiter, never to one that comes later."""

    def __init__(
        self, *, parallel: int, queued: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.parallel = parallel
        self.queued = queued
        self._clock = clock
        self._guard = threading.Lock()
        self._holding = 0
        self._line: deque[threading.Event] = deque()
        self._last_held = 1.0  # seconds: a guess until a turn has been held

    @property
    def holding(self) -> int:
        """Turns held now."""
        with self._guard:
            return self._holding

    @property
    def waiting(self) -> int:
        """Waiters in the line now."""
        with self._guard:
            return len(self._line)

    @contextlib.contextmanager
    def turn(self) -> Iterator[float]:
        """A turn for the duration; yields the seconds it waited for it. :class:`NoTurn`, at
        once, when ``parallel`` are held and ``queued`` wait."""
        asked = self._clock()
        with self._guard:
            if self._holding < self.parallel and not self._line:
                self._holding += 1
                ticket = None
            elif len(self._line) < self.queued:
                ticket = threading.Event()
                self._line.append(ticket)
            else:
                ahead = self._holding + len(self._line)
                raise NoTurn(max(1, math.ceil(ahead * self._last_held / self.parallel)))
        if ticket is not None:
            ticket.wait()  # set by the holder that gives its turn to this waiter
        began = self._clock()
        try:
            yield began - asked
        finally:
            with self._guard:
                self._last_held = self._clock() - began
                if self._line:
                    self._line.popleft().set()  # the turn passes on: as many held
                else:
                    self._holding -= 1
