"""Admission of new connections per client: a token bucket of connections for each client, and
a cap on those it holds open at once.

A client that reconnects as soon as it is closed (a WebSocket closed with 1008 for its message
budget, say) costs the server a handshake and a connection's start each time, however well each
connection is bounded: three such from one address held every other request at over 2.7 times
its calm latency (issue 47). Here each client's new connections take a token of its bucket, a
burst of ``rate.count`` earned back at ``rate.count`` per ``rate.period``; and a client holding
``max_open`` connections gets no more until one ends. What a refusal says is how long to wait.

The table of buckets is bounded (:data:`MAX_CLIENTS`, the least recently seen client dropped
first): a client with many addresses cannot grow it without end. A client dropped from it comes
back with a full bucket; the one dropped has been seen least recently, and so its bucket is the
fullest. The open counts need no bound of their own: an entry lives only while its client holds
a connection.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from core.message_budget import Rate, TokenBucket

MAX_CLIENTS = 10_000
# What a client holding its cap of open connections is told to wait: when one of them ends is
# anyone's guess.
OPEN_RETRY_AFTER_SEC = 10


@dataclass(frozen=True)
class Refusal:
    """Why a connection was refused, and the seconds to wait before the next (``Retry-After``)."""

    why: str
    retry_after: int


class ConnectionAdmission:
    """New connections of each client (a key: its address): ``rate`` of them (``None``: no rate)
    and ``max_open`` open at once (``None``: no cap). Not thread-safe: for one event loop."""

    def __init__(
        self,
        *,
        rate: Rate | None,
        max_open: int | None,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = rate
        self._max_open = max_open
        self._max_clients = max_clients
        self._clock = clock
        self._buckets: collections.OrderedDict[str, TokenBucket] = collections.OrderedDict()
        self._open: dict[str, int] = {}

    def admit(self, client: str) -> Refusal | None:
        """Count a new connection of ``client``: ``None`` when it is admitted (then it counts as
        open until :meth:`release`), else why not. A refused connection takes nothing."""
        if self._max_open is not None and self._open.get(client, 0) >= self._max_open:
            return Refusal(f"{self._max_open} open already", OPEN_RETRY_AFTER_SEC)
        if self._rate is not None:
            bucket = self._bucket(client)
            if not bucket.take():
                return Refusal(f"over {self._rate}", max(1, math.ceil(bucket.wait())))
        if self._max_open is not None:
            self._open[client] = self._open.get(client, 0) + 1
        return None

    def release(self, client: str) -> None:
        """A connection :meth:`admit` admitted for ``client`` has ended."""
        held = self._open.get(client)
        if held is None:
            return
        if held > 1:
            self._open[client] = held - 1
        else:
            del self._open[client]

    def open_count(self, client: str) -> int:
        """The connections ``client`` holds open, as counted here."""
        return self._open.get(client, 0)

    @property
    def clients(self) -> int:
        """How many clients' buckets are kept."""
        return len(self._buckets)

    def _bucket(self, client: str) -> TokenBucket:
        bucket = self._buckets.get(client)
        if bucket is not None:
            self._buckets.move_to_end(client)
            return bucket
        bucket = self._buckets[client] = TokenBucket(self._rate, clock=self._clock)
        if len(self._buckets) > self._max_clients:
            self._buckets.popitem(last=False)
        return bucket
