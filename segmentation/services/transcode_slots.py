"""How many uploads are decoded at once, and how many may wait for their turn.

Decoding a video holds its frames and the decoder's buffers in memory, and takes the cores, so
however many uploads arrive together only ``MAX_PARALLEL_TRANSCODES`` are probed or transcoded
at once (by default half the cores, at least one). Up to ``MAX_QUEUED_TRANSCODES`` more wait
their turn, in the order they came, for at most ``TRANSCODE_WAIT_SEC``; an upload that finds the
queue full, or waits longer, is refused with ``SERVER_BUSY`` and the seconds after which to try
again, having kept nothing. The order is kept by :mod:`core.turns`, which hands a freed slot to
the first waiter: with a semaphore, as before, an upload that came as a slot was freed could
take it before the waiter woke, and one waiting could be passed over until its time ran out.

The slots share the cores: each transcode's decoder and encoder run on at most cores divided by
slots threads (at most ``MAX_THREADS_EACH``), where FFmpeg would take one a core for each. A
decoder's threads hold a frame or more each, so on a 16-core machine the default 8 slots would
otherwise decode a 4K upload on 16 threads apiece (one UHD transcode at a time took the server
to a peak of 716-726 MB that way; on one thread, 344-366 MB).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from django.conf import settings

from core.threads import MadeOnce
from core.turns import NoTurn, Turns, TurnTimedOut
from segmentation.errors import ServerBusy

RETRY_AFTER_SEC = 10
MAX_THREADS_EACH = 4


class TranscodeSlots:
    """The slots as turns (:mod:`core.turns`): a slot freed goes to the upload that has waited
    longest, never to one that came after it."""

    def __init__(self, *, parallel: int, queued: int, wait: float) -> None:
        self.threads_each = max(1, min(MAX_THREADS_EACH, (os.cpu_count() or 1) // parallel))
        self._turns = Turns(parallel=parallel, queued=queued)
        self._wait = wait

    @property
    def waiting(self) -> int:
        """Uploads waiting for a slot now."""
        return self._turns.waiting

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A slot for the duration; :class:`ServerBusy` if none comes in time."""
        with contextlib.ExitStack() as slot:
            try:
                slot.enter_context(self._turns.turn(wait=self._wait))
            except TurnTimedOut:
                raise ServerBusy(
                    f"the upload waited {self._wait:g} s for its turn to be decoded; "
                    f"try again in {RETRY_AFTER_SEC} s",
                    retry_after=RETRY_AFTER_SEC,
                ) from None
            except NoTurn:
                raise ServerBusy(
                    f"too many uploads at once: {self._turns.parallel} being decoded and "
                    f"{self._turns.queued} waiting; try again in {RETRY_AFTER_SEC} s",
                    retry_after=RETRY_AFTER_SEC,
                ) from None
            yield


@MadeOnce
def transcode_slots() -> TranscodeSlots:
    """The process's slots, from the settings on first use."""
    return TranscodeSlots(
        parallel=settings.MAX_PARALLEL_TRANSCODES,
        queued=settings.MAX_QUEUED_TRANSCODES,
        wait=settings.TRANSCODE_WAIT_SEC,
    )
