"""Per-client rate limits, counted in Django's cache.

A limit (:class:`config.env.Rate`) is ``count`` requests of one kind per ``period`` seconds
for each client (its address: :func:`config.client_address.client_address`), counted in fixed
windows: the first request of a window creates its counter, which expires with the window.
With ``REDIS_URL`` the cache is Redis, so every server process counts against the same
limits; otherwise each process counts its own (the in-memory cache). A cache that cannot be
reached limits nothing (and says so in the log): the limits are a guard, not a gate.

django-ratelimit does the same, but refuses to start on the in-memory cache (it is "not
shared"), which is this project's default; the counting is a few lines of the cache framework.
"""

from __future__ import annotations

import logging
import math
import time

from django.core.cache import cache
from django.http import HttpRequest

from config.client_address import client_address
from config.env import Rate

logger = logging.getLogger(__name__)


def rate_limit_wait(request: HttpRequest, *, kind: str, rate: Rate | None) -> int | None:
    """Count one request of ``kind`` for the request's client; ``None`` while it is within
    ``rate``, else the seconds until its window ends (for ``Retry-After``)."""
    if rate is None:
        return None
    now = time.time()
    window = int(now // rate.period)
    key = f"rate:{kind}:{client_address(request)}:{window}"
    try:
        count = _counted(key, timeout=rate.period + 1)
    except Exception as error:  # the cache's own failure (Redis down): count nothing
        logger.warning("rate limit %s not counted: %s", kind, error)
        return None
    if count <= rate.count:
        return None
    return max(1, math.ceil((window + 1) * rate.period - now))


def _counted(key: str, *, timeout: int) -> int:
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr: this is the window's first request
        cache.add(key, 1, timeout=timeout)
        return 1
