"""How much engine time a session may spend on prompts: a bucket of seconds that refills.

Each session starts with ``SESSION_ENGINE_BURST_SEC`` seconds of engine time and earns
``SESSION_ENGINE_SHARE`` seconds back per second of wall-clock time, up to the burst. Every
click, clear and removal spends what the engine took. While the bucket is below zero, the session's
next prompt is refused (``RESOURCE_EXHAUSTED``, with the seconds until it holds time again);
one already running finishes, and may leave the bucket below zero, so a session cannot beat the
share by sending one long operation after another.

A person's clicks take a fraction of a second each and come seconds apart, so they never meet
the limit; a client that sends costly prompts back to back is held to its share of a core.
Propagations are not metered here: a session runs one at a time, a cancel or a hang-up stops
it within a frame, and its length is bounded by the video's. Nor is the replay of a session's
work that a restart lost, as far as the server's receipt covers it (``local_sessions.py``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from segmentation.errors import ResourceExhausted


class EngineBudget:
    def __init__(
        self, *, burst: float, share: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._burst = burst
        self._share = share
        self._clock = clock
        self._seconds = burst
        self._at = clock()
        self._guard = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._burst > 0 and self._share > 0

    def check(self) -> None:
        """:class:`ResourceExhausted` while the bucket is below zero."""
        if not self.enabled:
            return
        with self._guard:
            seconds = self._refilled()
        if seconds < 0:
            wait = max(1, math.ceil(-seconds / self._share))
            raise ResourceExhausted(
                f"this session used its engine time (a share of {self._share:g} of a core, "
                f"bursts of {self._burst:g} s); try again in {wait} s",
                retry_after=wait,
            )

    def spend(self, seconds: float) -> None:
        if not self.enabled:
            return
        with self._guard:
            self._seconds = self._refilled() - seconds

    def _refilled(self) -> float:
        now = self._clock()
        self._seconds = min(self._burst, self._seconds + (now - self._at) * self._share)
        self._at = now
        return self._seconds
