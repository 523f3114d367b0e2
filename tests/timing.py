"""Time in tests: a clock the test sets by hand, and a wait for what other threads make true."""

from __future__ import annotations

import time
from collections.abc import Callable


class Clock:
    """A clock that stands still until the test moves ``now``."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def until(condition: Callable[[], object], timeout: float = 10) -> None:
    """Wait until ``condition()`` holds, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)
