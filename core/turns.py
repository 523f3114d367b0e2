"""Turns at work that takes a core for a while: a few at a time, a bounded line of waiters in the
order they came, and a refusal, with the seconds to wait, past it.

Made for the admin's password checks (``edge/admin_login.py``), which run outside the
interpreter's lock, each taking a core for about 0.3 s: run all at once, a burst of them left the
event loop a small share of the cores, and every other request waited with it (issue 47). The
uploads' decoding takes its turns here too (``segmentation/services/transcode_slots.py``).

A waiter holds its thread (the request's own) while it waits, and nothing else; the line's
bound bounds those threads and the wait. A caller may bound its own wait as well (``wait``), or
be told to stop waiting (``stop``: its client cancelled): one that gives up leaves the line,
and one given the turn just as it gave up passes the turn on to the next, so that no turn is
lost to the race.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from core.threads import Stopped

STOP_POLL_SEC = 0.1  # how often a waiter that may be stopped looks at its flag


class NoTurn(Exception):
    """The line is full; ``retry_after``: the seconds until it has likely made room."""

    def __init__(self, retry_after: int, *, why: str = "no turn free") -> None:
        super().__init__(f"{why}; try again in {retry_after} s")
        self.retry_after = retry_after


class TurnTimedOut(NoTurn):
    """No turn came within the wait asked for; the waiter has left the line."""

    def __init__(self, retry_after: int, *, wait: float) -> None:
        super().__init__(retry_after, why=f"no turn came within {wait:g} s")
        self.wait = wait


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
    def turn(
        self, *, wait: float | None = None, stop: threading.Event | None = None
    ) -> Iterator[float]:
        """A turn for the duration; yields the seconds it waited for it. :class:`NoTurn`, at
        once, when ``parallel`` are held and ``queued`` wait; :class:`TurnTimedOut` when no
        turn came within ``wait`` seconds (``None``: wait for it however long);
        :class:`core.threads.Stopped` once ``stop`` is set while it waits."""
        asked = self._clock()
        with self._guard:
            if self._holding < self.parallel and not self._line:
                self._holding += 1
                ticket = None
            elif len(self._line) < self.queued:
                ticket = threading.Event()
                self._line.append(ticket)
            else:
                raise NoTurn(self._retry_after())
        # set by the holder that gives its turn to this waiter
        if ticket is not None and not self._given(ticket, wait=wait, stop=stop):
            with self._guard:
                if ticket.is_set():  # handed the turn as the wait ran out: the next one's now
                    self._pass_on()
                else:
                    self._line.remove(ticket)
                retry_after = self._retry_after()
            if stop is not None and stop.is_set():
                raise Stopped
            raise TurnTimedOut(retry_after, wait=wait)
        began = self._clock()
        try:
            yield began - asked
        finally:
            with self._guard:
                self._last_held = self._clock() - began
                self._pass_on()

    def _given(
        self, ticket: threading.Event, *, wait: float | None, stop: threading.Event | None
    ) -> bool:
        """Whether ``ticket`` is given its turn within ``wait`` seconds, and before ``stop``."""
        if stop is None:
            return ticket.wait(wait)
        deadline = None if wait is None else self._clock() + wait
        while not stop.is_set():
            left = (
                STOP_POLL_SEC if deadline is None else min(STOP_POLL_SEC, deadline - self._clock())
            )
            if left <= 0:
                return ticket.is_set()
            if ticket.wait(left):
                return True
        return False

    def _pass_on(self) -> None:
        """A turn given up (the guard held): to the first waiter, as many held; else one fewer
        held."""
        if self._line:
            self._line.popleft().set()
        else:
            self._holding -= 1

    def _retry_after(self) -> int:
        """The seconds until those holding and waiting now have likely had their turns (the
        guard held)."""
        ahead = self._holding + len(self._line)
        return max(1, math.ceil(ahead * self._last_held / self.parallel))
