"""Functions the tests of ``core/processes.py`` call in a child process (by their module and
name, as every call there is made)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator


def modules_loaded(*, prefixes: tuple[str, ...]) -> list[str]:
    """The modules the child has imported whose names start with one of ``prefixes``."""
    return sorted(name for name in sys.modules if name.startswith(prefixes))


def busy(*, seconds: float) -> int:
    """Work the interpreter for ``seconds``; how many rounds it made."""
    rounds = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rounds += 1
    return rounds


def niceness() -> int:
    """The child's niceness."""
    return os.nice(0)


def crash(*, status: int) -> None:
    """End the child at once, as the system's killer would, without an answer."""
    os._exit(status)


def doubled(*, items: Iterator[int], times: int) -> Iterator[int]:
    """Each item times ``times`` (a stream's function)."""
    for item in items:
        yield item * times


def failing(*, items: Iterator[int], after: int) -> Iterator[int]:
    """The items, until ``after`` of them have gone; then a failure."""
    for count, item in enumerate(items):
        if count == after:
            raise ValueError(f"failed after {after}")
        yield item
