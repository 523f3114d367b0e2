"""Work charged to the client's cost limit before it runs (``config/rate_limits.py``), for the
views whose work GraphQL's cost check does not see: the exports, the import and receipts."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from core.client_address import client_address
from core.rate_limits import rate_limit_capped, rate_limit_refusal, rate_limit_wait


def charged(request: HttpRequest, *, weight: int) -> JsonResponse | None:
    """Count ``weight`` (capped: ``rate_limit_capped``) against the client's cost limit,
    refused or not; the 429 if it is over."""
    rate = settings.RATE_LIMIT_COST
    wait = rate_limit_wait(
        address=client_address(request),
        kind="cost",
        rate=rate,
        weight=rate_limit_capped(weight, rate=rate),
    )
    if wait is None:
        return None
    return rate_limit_refusal(path=request.path, what="work", wait=wait)
