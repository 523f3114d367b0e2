"""A channel's sources, in order, and which to try next when one fails.

A channel has a primary source and may have backups (the playlist entries that share its
``tvg-id``, and backups an administrator added). When the source that plays fails, the hub
moves on to the next, round the list and back to the primary: it never waits for a failed
source to come back while another may answer, and it never opens a connection to a source
sooner than that source's own backoff after the last one it opened, the backoff doubling with
every failure up to a cap. A source that played for a while (:data:`STABLE_SECONDS`) starts its
backoff afresh when it fails; one that fails again and again soon after answering keeps
backing off, so a flapping stream is not reopened in a loop, while one that played longer than
its backoff may be tried again at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

STABLE_SECONDS = 10.0


@dataclass(frozen=True)
class Upstream:
    """One source: where the hub reads it, the headers it sends there, and whether its picture
    and its sound are judged (``picture_watch.py``, ``audio_watch.py``; not for a channel that
    is legitimately still)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    picture_checks: bool = True

    def as_record(self) -> dict[str, Any]:
        """As plain data (JSON: a row's field, a message to the other processes)."""
        record: dict[str, Any] = {"url": self.url, "headers": dict(self.headers)}
        if not self.picture_checks:
            record["picture_checks"] = False
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Upstream:
        return cls(
            record["url"],
            record.get("headers") or {},
            picture_checks=record.get("picture_checks", True) is not False,
        )


def source_label(index: int, count: int) -> str:
    """``primary``, or ``backup 2 of 3``: the second of three sources."""
    return "primary" if index == 0 else f"backup {index + 1} of {count}"


class SourceCycle:
    """Per source, when it may be tried again and its next backoff."""

    def __init__(
        self,
        count: int,
        *,
        backoff_initial: float,
        backoff_max: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if count < 1:
            raise ValueError("a channel has at least one source")
        self._count = count
        self._initial = backoff_initial
        self._max = backoff_max
        self._clock = clock
        self._retry_at = [0.0] * count
        self._backoff = [backoff_initial] * count

    def next(self, after: int | None) -> tuple[int, float]:
        """The source to try after source ``after`` (None: the primary first) and how many
        seconds to wait before trying it: the first in cycle order whose backoff has passed,
        else the one whose backoff ends first."""
        now = self._clock()
        start = 0 if after is None else (after + 1) % self._count
        order = [(start + step) % self._count for step in range(self._count)]
        for index in order:
            if self._retry_at[index] <= now:
                return index, 0.0
        index = min(order, key=lambda i: self._retry_at[i])
        return index, self._retry_at[index] - now

    def failed(self, index: int, *, played_seconds: float, connected_seconds: float) -> float:
        """Record that source ``index`` failed after playing ``played_seconds`` (0: it never
        played) of a connection opened ``connected_seconds`` ago; the backoff it now waits
        from that opening, which is returned."""
        if played_seconds >= STABLE_SECONDS:
            self._backoff[index] = self._initial
        backoff = self._backoff[index]
        self._retry_at[index] = self._clock() - connected_seconds + backoff
        self._backoff[index] = min(backoff * 2, self._max)
        return backoff
