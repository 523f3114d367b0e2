"""Per-client rate limits, counted in Django's cache.

A limit (a :class:`core.message_budget.Rate`, as ``config/env.py`` reads one) is ``count``
requests of one kind (or units of what they cost) per ``period`` seconds for each client (its
address: :func:`core.client_address.client_address`), counted in fixed windows: the first
request of a window creates its counter, which expires with the window. With ``REDIS_URL`` the
cache is Redis, so every server process counts against the same limits; otherwise each process
counts its own (the in-memory cache). A cache that cannot be reached limits nothing (and says so in
the log), and is not asked again for a while (``cache_outage.py``): the limits are a guard, not a
gate.

django-ratelimit does the same, but refuses to start on the in-memory cache (it is "not
shared"), which is this project's default; the counting is a few lines of the cache framework.
The ASGI gate that answers a client already over its limit in front of Django is the edge's
(``edge/rate_limit_gate.py``).
"""

from __future__ import annotations

import math
import time

from django.core.cache import cache
from django.http import JsonResponse

from core.cache_outage import cache_away, cache_failed
from core.message_budget import Rate

CODE = "RATE_LIMITED"
GRAPHQL_PATH = "/graphql"


def rate_limit_wait(*, address: str, kind: str, rate: Rate | None, weight: int = 1) -> int | None:
    """Count ``weight`` of ``kind`` for the client at ``address`` (0: only look); ``None``
    while it is within ``rate``, else the seconds until its window ends (``Retry-After``)."""
    if rate is None or cache_away():
        return None
    now = time.time()
    window = int(now // rate.period)
    key = f"rate:{kind}:{address}:{window}"
    try:
        count = _counted(key, weight, timeout=rate.period + 1) if weight else cache.get(key, 0)
    except Exception as error:  # the cache's own failure (Redis down or hung): count nothing
        cache_failed(f"rate limit {kind} not counted", error)
        return None
    if count <= rate.count:
        return None
    return max(1, math.ceil((window + 1) * rate.period - now))


def rate_limit_capped(weight: int, *, rate: Rate | None) -> int:
    """``weight``, but at most half of ``rate``'s count: what one request (or one step of one)
    is charged, so that a step always passes for a client otherwise idle in its window, while
    a flood of them is still held to the limit."""
    if rate is None:
        return weight
    return min(weight, max(1, rate.count // 2))


class CostMeter:
    """A client's cost limit, charged step by step by a request that does its work in steps
    (the annotation import: a frame a step). A step is charged only if it fits (:meth:`take`),
    each capped as :func:`rate_limit_capped` caps a request, and a step taken but then not done
    is given back (:meth:`give_back`), so that the client pays for the steps done and no
    others."""

    def __init__(self, *, address: str, kind: str, rate: Rate | None) -> None:
        self.address = address
        self.kind = kind
        self.rate = rate
        self._taken: tuple[str, int] | None = None  # the last step's counter and weight

    def take(self, weight: int) -> int | None:
        """Count ``weight`` (capped) if the client's window holds it: ``None``; else the
        seconds until the window ends, and nothing counted."""
        rate = self.rate
        if rate is None or cache_away():
            return None
        weight = rate_limit_capped(weight, rate=rate)
        now = time.time()
        window = int(now // rate.period)
        key = f"rate:{self.kind}:{self.address}:{window}"
        try:
            count = _counted(key, weight, timeout=rate.period + 1)
            if count <= rate.count:
                self._taken = (key, weight)
                return None
            cache.decr(key, weight)
        except ValueError:  # the window's counter expired since the count: nothing counted
            return None
        except Exception as error:  # the cache's own failure (Redis down or hung): count nothing
            cache_failed(f"rate limit {self.kind} not counted", error)
            return None
        return max(1, math.ceil((window + 1) * rate.period - now))

    def give_back(self) -> None:
        """Uncount the last step taken (it was not done), in the window it was counted in."""
        if self._taken is None:
            return
        key, weight = self._taken
        self._taken = None
        if cache_away():
            return
        try:
            cache.decr(key, weight)
        except ValueError:  # expired with its window: nothing owed
            pass
        except Exception as error:  # the cache failed: nothing owed
            cache_failed(f"rate limit {self.kind} not given back", error)


def _counted(key: str, weight: int, *, timeout: int) -> int:
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key, weight)
    except ValueError:  # expired between add and incr: this is the window's first request
        cache.add(key, weight, timeout=timeout)
        return weight


def rate_limit_message(what: str, wait: int) -> str:
    return f"this client sent more than its limit of {what}; try again in {wait} s"


def rate_limit_refusal(*, path: str, what: str, wait: int) -> JsonResponse:
    """The 429 answer, in the shape of the endpoint at ``path`` (a GraphQL error on /graphql,
    the segmentation views' error elsewhere), with ``Retry-After``."""
    message = rate_limit_message(what, wait)
    if path == GRAPHQL_PATH:
        body: dict = {"errors": [{"message": message, "extensions": {"code": CODE}}]}
    else:
        body = {"error": message, "code": CODE}
    response = JsonResponse(body, status=429)
    response["Retry-After"] = str(wait)
    return response
