"""Failed logins to the Django admin, throttled per client address and per username.

A failed login (a wrong password, an unknown user, a user who is not staff) counts against the
client's address (:func:`config.client_address.client_address`: behind a trusted proxy, the
client ``X-Forwarded-For`` names) and against the username tried, in Django's cache (Redis with
``REDIS_URL``, shared by every process; else each process's memory). A limit is ``count``
failures per ``period``: the first attempt opens a window of ``period``, and once ``count``
failures from an address (``ADMIN_LOGIN_FAILURES_PER_ADDRESS``) or for a username
(``ADMIN_LOGIN_FAILURES_PER_USERNAME``) fall in it, logins from that address or for that
username are refused until it ends, the right password too (it is not checked): the login page
says so, with status 429 and ``Retry-After``.

An attempt takes its place under both limits before its password is hashed, in one atomic step
of the cache, and gives it back only once the password proved right: counted after the hash,
guesses sent at once were all checked against a count none of them had raised yet (issue 47).
So of any number of attempts sent at once, at most ``count`` have their password checked.

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
    """The admin's login form: each attempt takes its place under the limits before the password
    is checked, so that a throttled client or username is refused before it authenticates, and
    attempts sent at once count as they are made rather than as their hashes finish."""

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
        reserved: list[tuple[str, Rate | None]] = []
        for what, key, rate in limits:
            wait = _attempt_reserve(key, rate)
            if wait is not None:
                for taken in reserved:
                    _attempt_release(*taken)
                setattr(self.request, RETRY_AFTER, wait)
                minutes = math.ceil(wait / 60)
                raise ValidationError(
                    f"Too many failed logins {what}; try again in {minutes} "
                    f"minute{'' if minutes == 1 else 's'}.",
                    code="throttled",
                )
            reserved.append((key, rate))
        failed = False
        try:
            return super().clean()
        except ValidationError:
            failed = True  # the attempt stays counted: it is a failure now
            raise
        finally:
            if not failed:
                for taken in reserved:
                    _attempt_release(*taken)


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin site's login view; a throttled login's page has status 429 and Retry-After."""
    response = admin.site.login(request)
    wait = getattr(request, RETRY_AFTER, None)
    if wait is not None:
        response.status_code = 429
        response["Retry-After"] = str(wait)
    return response


def _attempt_reserve(key: str, rate: Rate | None) -> int | None:
    """Count one more attempt under ``key`` before its password is checked; ``None`` if it fits
    within ``rate`` (the first attempt opens a window of ``rate.period``), else the seconds
    until the window ends (and the attempt is not counted).

    The count is taken and read in one step (the cache's ``incr``, atomic in Redis and in the
    in-memory cache), so of any number of attempts sent at once, at most ``rate.count`` pass."""
    if rate is None:
        return None
    try:
        now = time.time()
        cache.add(f"{key}:since", now, timeout=rate.period)
        cache.add(f"{key}:failures", 0, timeout=rate.period)
        try:
            attempts = cache.incr(f"{key}:failures")
        except ValueError:  # expired since the add: the window's end is at hand
            cache.add(f"{key}:failures", 1, timeout=rate.period)
            attempts = 1
        if attempts <= rate.count:
            return None
        _attempt_release(key, rate)
        since = cache.get(f"{key}:since")
    except Exception as error:  # the cache's own failure (Redis down)
        logger.warning("admin login attempt not counted: %s", error)
        return None
    if since is None:
        return 1
    return max(1, math.ceil(since + rate.period - now))


def _attempt_release(key: str, rate: Rate | None) -> None:
    """Take back an attempt :func:`_attempt_reserve` counted: the password was right (or never
    checked)."""
    if rate is None:
        return
    try:
        cache.decr(f"{key}:failures")
    except ValueError:  # the window ended meanwhile, and its count with it
        pass
    except Exception as error:  # the cache's own failure (Redis down)
        logger.warning("admin login attempt not taken back: %s", error)
