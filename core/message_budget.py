"""A per-connection budget of WebSocket messages: a token bucket each message takes from.

Without one, a client could send messages as fast as its socket allows, and each cost the
server a handler's work: three connections sending ``{"type": "refresh"}`` to the status feed
held every other request of the process back by 24 s (issue 47). The server takes the budget
(``edge/websocket_close.py``) as each frame is decoded, before the application sees it: taken
in the consumer, behind daphne's queue of decoded frames, the close waited behind the backlog
of a fast flood, which was never closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from django.conf import settings

POLICY_VIOLATION = 1008  # RFC 6455: the message broke the endpoint's policy


class Rate(Protocol):
    count: int
    period: int


class TokenBucket:
    """``rate.count`` tokens at most, refilled at ``rate.count`` per ``rate.period`` seconds;
    full at first."""

    def __init__(self, rate: Rate, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._capacity = float(rate.count)
        self._refill = rate.count / rate.period
        self._clock = clock
        self._tokens = self._capacity
        self._at = clock()

    def take(self) -> bool:
        """Take one token; ``False`` (taking nothing) when there is none."""
        self._fill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def wait(self) -> float:
        """Seconds until a token can be taken (0: one can now)."""
        self._fill()
        return max(0.0, (1 - self._tokens) / self._refill)

    def _fill(self) -> None:
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._at) * self._refill)
        self._at = now


def message_budget() -> TokenBucket | None:
    """A new connection's budget, ``WEBSOCKET_MESSAGE_BUDGET``; ``None`` when there is none."""
    rate = settings.WEBSOCKET_MESSAGE_BUDGET
    return None if rate is None else TokenBucket(rate)
