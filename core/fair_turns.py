"""Turns at work that many clients share, given fairly: a few at a time, and the next free one to
the waiter whose client has held turns least lately.

Made for the segmentation engine (``segmentation/services/engine_turns.py``): with every call run
at once, eight clients each sending the dearest click back to back shared the cores equally
with a person's one-point click, which then took 15 times as long as alone (issue 47).

- *Least attained service.* Each client's seconds holding turns are summed, decaying with time:
  a second held ``memory`` seconds ago counts as 1/e of one, so a burst a minute old (at the
  default 10 s) counts for nothing. A turn running now counts as it runs. A free turn goes to
  the waiter whose client has the least, ties to the one that came first. A client that sends
  costly work back to back therefore runs only when nobody who used less is waiting, whatever
  the length of its own line: an occasional click passes ahead of it. (One that asks for more
  than its share of the turns, at the moment, waits for the others' in turn: fair, not first.)
- *Steps.* Work made of steps (a click's points, a propagation's frames and the frames it
  carries a mask across) offers its turn between them (:meth:`Turn.step`): when a waiter is due
  before the holder, the waiter takes the turn and the holder waits in line again. A click
  therefore waits for a step of the work ahead of it, not for a whole operation.
- *A bounded line.* At most ``queued`` waiters, ``queued_per_client`` of one client; past
  either, :class:`~core.turns.NoTurn` at once, with the seconds to wait. Work already under way
  may rejoin the line uncounted (``admitted``: a propagation's later frames, a holder after a
  step), so that it is never cut off in the middle. A waiter whose ``gone()`` turns true (its
  client went away, or cancelled) leaves the line within ``POLL_SECONDS``, raising
  :class:`~core.threads.Stopped`; a holder waiting again after a step does not (the engine's
  own state is mid-operation then, and the wait is short by the rule above).

A waiter holds its thread while it waits, and nothing else.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator

from core.threads import Stopped
from core.turns import NoTurn

POLL_SECONDS = 0.1  # how often a waiter looks whether its client went away
FIRST_GUESS_SEC = 1.0  # a turn's length until one has been held
MEAN_WEIGHT = 0.2  # the weight of the latest hold in the running mean of their lengths
FORGOTTEN = 1e-6  # a client's seconds below this, with nothing held or waiting: forgotten


class Turn:
    """One piece of work's turn, held or awaited for ``client``."""

    def __init__(self, turns: FairTurns, client: str, order: int) -> None:
        self.client = client
        self.order = order  # its place in the order of arrival
        self.waited = 0.0  # seconds spent in the line, over every wait
        self._turns = turns
        self._held = 0.0  # seconds held, over the holds before the current one
        self._began: float | None = None  # the current hold's start; None while not holding
        self._given = threading.Event()

    @property
    def held(self) -> float:
        """Seconds this work has held its turn so far (its waits after steps left out)."""
        return self._turns.held(self)

    def step(self) -> None:
        """Between two steps of the work: give the turn to a waiter due before this one, if any,
        and wait in line for it again."""
        self._turns.step(self)


class FairTurns:
    """At most ``parallel`` turns held at once; a free one to the waiter whose client has the
    least decayed holding time, ties in order of arrival; at most ``queued`` waiters, and
    ``queued_per_client`` of one client (see the module)."""

    def __init__(
        self,
        *,
        parallel: int,
        queued: int,
        queued_per_client: int,
        memory: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.parallel = parallel
        self.queued = queued
        self.queued_per_client = queued_per_client
        self.memory = memory
        self._clock = clock
        self._guard = threading.Lock()
        self._holders: set[Turn] = set()
        self._line: list[Turn] = []
        self._served: dict[str, tuple[float, float]] = {}  # client: (seconds, as of when)
        self._orders = itertools.count()
        self._mean_hold = FIRST_GUESS_SEC
        self._pruned = clock()

    @property
    def holding(self) -> int:
        """Turns held now."""
        with self._guard:
            return len(self._holders)

    @property
    def waiting(self) -> int:
        """Waiters in the line now."""
        with self._guard:
            return len(self._line)

    def attained(self, client: str) -> float:
        """The client's decayed seconds of holding turns, its turns held now counted whole."""
        with self._guard:
            return self._attained_locked(client, self._clock())

    def held(self, turn: Turn) -> float:
        """:attr:`Turn.held`."""
        with self._guard:
            running = 0.0 if turn._began is None else self._clock() - turn._began
            return turn._held + running

    def check_room(self, client: str) -> None:
        """:class:`NoTurn` if a turn asked for now by ``client`` would be refused."""
        with self._guard:
            if not self._free_locked():
                self._admit_locked(client)

    @contextlib.contextmanager
    def turn(
        self, client: str, *, gone: Callable[[], bool] | None = None, admitted: bool = False
    ) -> Iterator[Turn]:
        """A turn for ``client``'s work for the duration. :class:`NoTurn` at once when the line
        is full, unless ``admitted``; :class:`Stopped` when ``gone()`` turns true first."""
        turn = Turn(self, client, next(self._orders))
        with self._guard:
            now = self._clock()
            if self._free_locked():
                self._hold_locked(turn, now)
            else:
                if not admitted:
                    self._admit_locked(client)
                self._line.append(turn)
        self._wait(turn, gone)
        try:
            yield turn
        finally:
            with self._guard:
                self._release_locked(turn, self._clock())

    def step(self, turn: Turn) -> None:
        """:meth:`Turn.step`."""
        with self._guard:
            if not self._line:
                return
            now = self._clock()
            due = min(self._line, key=lambda waiter: self._key_locked(waiter, now))
            if self._key_locked(due, now) >= self._key_locked(turn, now):
                return
            turn._given.clear()
            self._release_locked(turn, now)  # to ``due``: the line's first by the same order
            self._line.append(turn)
        self._wait(turn, None)

    # Under the guard.

    def _free_locked(self) -> bool:
        return len(self._holders) < self.parallel and not self._line

    def _admit_locked(self, client: str) -> None:
        mine = sum(1 for waiter in self._line if waiter.client == client)
        if len(self._line) < self.queued and mine < self.queued_per_client:
            return
        ahead = len(self._holders) + len(self._line)
        raise NoTurn(max(1, math.ceil(ahead * self._mean_hold / self.parallel)))

    def _attained_locked(self, client: str, now: float) -> float:
        seconds, at = self._served.get(client, (0.0, now))
        running = sum(
            now - holder._began
            for holder in self._holders
            if holder.client == client and holder._began is not None
        )
        return seconds * math.exp(-(now - at) / self.memory) + running

    def _key_locked(self, turn: Turn, now: float) -> tuple[float, int]:
        return self._attained_locked(turn.client, now), turn.order

    def _hold_locked(self, turn: Turn, now: float) -> None:
        turn._began = now
        self._holders.add(turn)
        turn._given.set()

    def _release_locked(self, turn: Turn, now: float) -> None:
        """End the turn's hold (or, given it just as it left, that hold), charge its client, and
        give the free turn to the line."""
        self._holders.discard(turn)
        if turn._began is not None:
            held = now - turn._began
            turn._held += held
            turn._began = None
            seconds, at = self._served.get(turn.client, (0.0, now))
            self._served[turn.client] = (seconds * math.exp(-(now - at) / self.memory) + held, now)
            self._mean_hold += MEAN_WEIGHT * (held - self._mean_hold)
        while self._line and len(self._holders) < self.parallel:
            due = min(self._line, key=lambda waiter: self._key_locked(waiter, now))
            self._line.remove(due)
            self._hold_locked(due, now)
        if now - self._pruned > self.memory:
            self._prune_locked(now)

    def _prune_locked(self, now: float) -> None:
        busy = {turn.client for turn in (*self._holders, *self._line)}
        for client, (seconds, at) in list(self._served.items()):
            if client not in busy and seconds * math.exp(-(now - at) / self.memory) < FORGOTTEN:
                del self._served[client]
        self._pruned = now

    # Outside the guard.

    def _wait(self, turn: Turn, gone: Callable[[], bool] | None) -> None:
        """Until the turn is given to ``turn``; :class:`Stopped`, out of the line, once
        ``gone()``."""
        asked = self._clock()
        while not turn._given.wait(None if gone is None else POLL_SECONDS):
            if gone is not None and gone():
                with self._guard:
                    if turn in self._line:
                        self._line.remove(turn)
                    else:  # given the turn just now: it passes on
                        self._release_locked(turn, self._clock())
                raise Stopped(f"{turn.client} went away while waiting for a turn")
        with self._guard:
            if turn._began is not None:
                turn.waited += max(0.0, turn._began - asked)
