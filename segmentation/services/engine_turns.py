"""Engine calls take turns, shared fairly between clients (``core/fair_turns.py``).

Every session's engine work (a click, a clear, a removal, an import's frame, each frame of a
propagation) runs in a turn of its process's :class:`FairTurns`: at most
``ENGINE_PARALLEL_CALLS`` at once (by default as many as the engine says the machine's cores run
at once, :meth:`Engine.calls_at_once`: for ``classic`` one for every two cores, for ``sam2`` on
the CPU one, its operators using every core), the next free turn to the waiting client that has
held the engine least over the last ``ENGINE_FAIR_MEMORY_SEC`` or so. A client is the address
that opened the session (``Session.client``), which an inference worker has from the web
process that opened it; a session without one is a client of its own. While a call holds its
turn, its state's ``between_steps`` offers the turn to a client due before it.

Without turns, eight clients sending the dearest click the cost limit admits, back to back, from
eight addresses, shared the two cores with a person's one-point click, which took 15 times as
long as alone (``benchmarks/hostile_clients.py --kinds within``); with them it waits for a step
of the work ahead of it (a part of a click's point, a frame), not for its share of everyone's:
about twice as long as alone (docs/benchmarks.md, "Fair engine turns").

A propagation takes a turn per frame, so that clicks interleave with other people's
propagations; it is refused (``SERVER_BUSY``) before its first frame if its client's line is
full, and its later frames rejoin the line without being counted. A frame that waits for its
turn when its client went away or cancelled leaves the line.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

from django.conf import settings

from core.fair_turns import FairTurns, Turn
from core.threads import MadeOnce
from core.turns import NoTurn
from segmentation.engines.base import VideoState
from segmentation.errors import ServerBusy
from segmentation.services.process_engine import engine_get


@MadeOnce
def engine_turns() -> FairTurns:
    """The process's turns, configured from settings on first use."""
    return FairTurns(
        parallel=engine_parallel_calls(),
        queued=settings.ENGINE_QUEUED_CALLS,
        queued_per_client=settings.ENGINE_QUEUED_CALLS_PER_CLIENT or settings.ENGINE_QUEUED_CALLS,
        memory=settings.ENGINE_FAIR_MEMORY_SEC,
    )


def engine_parallel_calls() -> int:
    """``ENGINE_PARALLEL_CALLS``, or where it is 0, the engine's own count for the cores this
    process may run on."""
    if settings.ENGINE_PARALLEL_CALLS:
        return settings.ENGINE_PARALLEL_CALLS
    return engine_get().calls_at_once(_cores())


def engine_room_check(turns: FairTurns, *, client: str) -> None:
    """:class:`ServerBusy` if a call of ``client``'s would be refused a turn now."""
    try:
        turns.check_room(client)
    except NoTurn as busy:
        raise _busy(busy) from None


@contextlib.contextmanager
def engine_turn(
    turns: FairTurns,
    *,
    client: str,
    state: VideoState,
    gone: Callable[[], bool] | None = None,
    admitted: bool = False,
) -> Iterator[Turn]:
    """A turn for ``client``'s call on ``state``, which offers it between its steps meanwhile.
    :class:`ServerBusy` when the line is full (unless ``admitted``); ``core.threads.Stopped``
    when ``gone()`` turns true before the turn comes."""
    with contextlib.ExitStack() as stack:
        try:
            turn = stack.enter_context(turns.turn(client, gone=gone, admitted=admitted))
        except NoTurn as busy:
            raise _busy(busy) from None
        stack.callback(setattr, state, "between_steps", state.between_steps)
        state.between_steps = turn.step
        yield turn


def _busy(refusal: NoTurn) -> ServerBusy:
    return ServerBusy(
        f"too much engine work is waiting; try again in {refusal.retry_after} s",
        retry_after=refusal.retry_after,
    )


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
