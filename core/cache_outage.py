"""Django's cache while Redis is away: after a call to it fails (Redis down, or silent past the
cache's socket timeout, ``config/env.py``), it is not asked again for :data:`OUTAGE_SEC`,
so that each request meanwhile costs a look at a clock, not a timeout of its own. What the cache
guards here (the rate limits, the admin login's throttle) is a guard, not a gate: it lets
requests through meanwhile, as it does when a call fails."""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)

OUTAGE_SEC = 5.0

_away_until = 0.0  # monotonic: until then the cache is not asked


def cache_away() -> bool:
    """Whether the cache failed within the last :data:`OUTAGE_SEC`, so is not to be asked."""
    return time.monotonic() < _away_until


def cache_failed(what: str, error: Exception) -> None:
    """A call to the cache failed: say ``what`` it cost, and ask it nothing for a while."""
    global _away_until
    _away_until = time.monotonic() + OUTAGE_SEC
    logger.warning("%s: %s (the cache is not asked for %g s)", what, error, OUTAGE_SEC)
