"""Failed logins to the Django admin, throttled per client address and per username.

A failed login (a wrong password, an unknown user, a user who is not staff) counts against the
client's address (:func:`config.client_address.client_address`: behind a trusted proxy, the
client ``X-Forwarded-For`` names) and against the username tried, in Django's cache (Redis with
``REDIS_URL``, shared by every process; else each process's memory). A limit is ``count``
failures per ``period``: the first failure opens a window of ``period``, and once ``count``
failures from an address (``ADMIN_LOGIN_FAILURES_PER_ADDRESS``) or for a username
(``ADMIN_LOGIN_FAILURES_PER_USERNAME``) fall in it, logins from that address or for that
username are refused until it ends, the right password too (it is not checked): the login page
says so, with status 429 and ``Retry-After``.

The per-username limit holds back guessing spread over many addresses; the price, as with any
such lock, is that anyone may lock a username out until its window ends (an empty or ``0``
setting turns either limit off). A cache that cannot be reached throttles nothing, and says so
in the log.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from config.client_address import client_address
from config.env import Rate

logger = logging.getLogger(__name__)

RETRY_AFTER = "admin_login_retry_after"  # the request's attribute, for the view


class ThrottledLoginForm(AdminAuthenticationForm):
    """The admin's login form, refusing a throttled client or username before it authenticates
    and counting each failure."""

    def clean(self) -> dict:
        username = self.cleaned_data.get("username") or ""
        limits = [
            (
                "from this address",
                f"admin-login:address:{client_address(self.request)}",
                settings.ADMIN_LOGIN_FAILURES_PER_ADDRESS,
            ),
            (
                "for this username",
                f"admin-login:username:{hashlib.sha256(username.encode()).hexdigest()}",
                settings.ADMIN_LOGIN_FAILURES_PER_USERNAME,
            ),
        ]
        for what, key, rate in limits:
            wait = _throttled_for(key, rate)
            if wait is not None:
                setattr(self.request, RETRY_AFTER, wait)
                minutes = math.ceil(wait / 60)
                raise ValidationError(
                    f"Too many failed logins {what}; try again in {minutes} "
                    f"minute{'' if minutes == 1 else 's'}.",
                    code="throttled",
                )
        try:
            return super().clean()
        except ValidationError:
            for _, key, rate in limits:
                _failure_count(key, rate)
            raise


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin site's login view; a throttled login's page has status 429 and Retry-After."""
    response = admin.site.login(request)
    wait = getattr(request, RETRY_AFTER, None)
    if wait is not None:
        response.status_code = 429
        response["Retry-After"] = str(wait)
    return response


def _throttled_for(key: str, rate: Rate | None) -> int | None:
    """The seconds until the window of failures under ``key`` ends if they reached ``rate``;
    ``None`` if they did not (or there is no window)."""
    if rate is None:
        return None
    try:
        window = cache.get_many([f"{key}:since", f"{key}:failures"])
    except Exception as error:  # the cache's own failure (Redis down)
        logger.warning("admin login failures not read: %s", error)
        return None
    since, failures = window.get(f"{key}:since"), window.get(f"{key}:failures", 0)
    if since is None or failures < rate.count:
        return None
    return max(1, math.ceil(since + rate.period - time.time()))


def _failure_count(key: str, rate: Rate | None) -> None:
    """One more failure under ``key``; the first one opens a window of ``rate.period``."""
    if rate is None:
        return
    try:
        if cache.add(f"{key}:since", time.time(), timeout=rate.period):
            cache.set(f"{key}:failures", 1, timeout=rate.period)
            return
        try:
            cache.incr(f"{key}:failures")
        except ValueError:  # expired since: the window's end is at hand
            cache.add(f"{key}:failures", 1, timeout=rate.period)
    except Exception as error:  # the cache's own failure (Redis down)
        logger.warning("admin login failure not counted: %s", error)
