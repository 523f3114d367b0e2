"""A per-connection budget of WebSocket messages: a token bucket each message takes from, and a
consumer mixin that closes the connection with 1008 (policy violation) once it is spent.

Without one, a client could send messages as fast as its socket allows, and each cost the
server a handler's work: three connections sending ``{"type": "refresh"}`` to the status feed
held every other request of the process back by 24 s (issue 47). The budget is taken before a
message is decoded, so a flood costs the server a few microseconds a message until the close.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

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
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._at) * self._refill)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class MessageBudgetMixin:
    """For a Channels WebSocket consumer (put it first among the bases): each message the client
    sends takes a token of ``WEBSOCKET_MESSAGE_BUDGET`` (``None``: no budget); the first past
    it closes the connection with :data:`POLICY_VIOLATION`, and the messages still arriving
    before the close are dropped unread."""

    _message_budget: TokenBucket | None = None
    _over_budget = False

    async def websocket_receive(self, message: dict[str, Any]) -> None:
        if self._over_budget:
            return
        rate = settings.WEBSOCKET_MESSAGE_BUDGET
        if rate is not None:
            if self._message_budget is None:
                self._message_budget = TokenBucket(rate)
            if not self._message_budget.take():
                self._over_budget = True
                await self.close(code=POLICY_VIOLATION)  # type: ignore[attr-defined]
                return
        await super().websocket_receive(message)  # type: ignore[misc]
