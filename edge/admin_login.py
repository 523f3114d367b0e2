"""Failed logins to the Django admin, throttled per client address and per username.

A failed login (a wrong password, an unknown user, a user who is not staff) counts against the
client's address (:func:`core.client_address.client_address`: behind a trusted proxy, the
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

The password checks themselves take turns, process-wide (:mod:`core.turns`):
``ADMIN_LOGIN_PARALLEL_CHECKS`` at once (default one), ``ADMIN_LOGIN_QUEUED_CHECKS`` more waiting
in the order they came. Each check is a PBKDF2 hash, about 0.3 s of a core; the ten checks a
burst of guesses was allowed ran at once on both cores, and the event loop, one thread among
eleven wanting a core, held every other request back: ``/healthz`` took 1 s instead of 8 ms
(issue 47). One at a time, they leave a core to the rest. An attempt that finds the line full is
refused unchecked and given back (it is not a failure), its page saying so with status 503 and
``Retry-After``. Each check is logged, with its time and its wait.

The per-username limit holds back guessing spread over many addresses; the price, as with any
such lock, is that anyone may lock a username out until its window ends (an empty or ``0``
setting turns either limit off). A cache that cannot be reached throttles nothing, says so in
the log, and is not asked again for a while (``core/cache_outage.py``).
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from core.cache_outage import cache_away, cache_failed
from core.client_address import client_address
from core.message_budget import Rate
from core.turns import NoTurn, Turns

logger = logging.getLogger(__name__)

REFUSAL = "admin_login_refusal"  # the request's attribute, for the view: (status, Retry-After)


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
                setattr(self.request, REFUSAL, (429, wait))
                minutes = math.ceil(wait / 60)
                raise ValidationError(
                    f"Too many failed logins {what}; try again in {minutes} "
                    f"minute{'' if minutes == 1 else 's'}.",
                    code="throttled",
                )
            reserved.append((key, rate))
        failed = False
        try:
            with password_checks().turn() as waited:
                return self._password_check(waited=waited)
        except ValidationError:
            failed = True  # the attempt stays counted: it is a failure now
            raise
        except NoTurn as busy:  # given back below: the password was not checked
            setattr(self.request, REFUSAL, (503, busy.retry_after))
            raise ValidationError(
                f"Too many logins are being checked; try again in {busy.retry_after} "
                f"second{'' if busy.retry_after == 1 else 's'}.",
                code="busy",
            ) from None
        finally:
            if not failed:
                for taken in reserved:
                    _attempt_release(*taken)

    def _password_check(self, *, waited: float) -> dict:
        """Django's own check (the hash), in this attempt's turn; logged, failed or not."""
        began = time.monotonic()
        try:
            return super().clean()
        finally:
            # inside the turn, so that the lines of checks one after the other never overlap
            logger.info(
                "admin login: password checked in %d ms, after %d ms waiting for its turn",
                (time.monotonic() - began) * 1000,
                waited * 1000,
            )


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin site's login view; the page of a login refused unchecked has status 429
    (throttled) or 503 (too many checks waiting) and Retry-After."""
    response = admin.site.login(request)
    refusal = getattr(request, REFUSAL, None)
    if refusal is not None:
        response.status_code, wait = refusal
        response["Retry-After"] = str(wait)
    return response


_turns_guard = threading.Lock()
_turns: dict[tuple[int, int], Turns] = {}


def password_checks() -> Turns:
    """The process's turns at password checks, for the settings in force (made once for each:
    tests change them)."""
    key = (settings.ADMIN_LOGIN_PARALLEL_CHECKS, settings.ADMIN_LOGIN_QUEUED_CHECKS)
    with _turns_guard:
        if key not in _turns:
            _turns[key] = Turns(parallel=key[0], queued=key[1])
        return _turns[key]


def _attempt_reserve(key: str, rate: Rate | None) -> int | None:
    """Count one more attempt under ``key`` before its password is checked; ``None`` if it fits
    within ``rate`` (the first attempt opens a window of ``rate.period``), else the seconds
    until the window ends (and the attempt is not counted).

    The count is taken and read in one step (the cache's ``incr``, atomic in Redis and in the
    in-memory cache), so of any number of attempts sent at once, at most ``rate.count`` pass."""
    if rate is None or cache_away():
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
    except Exception as error:  # the cache's own failure (Redis down or hung)
        cache_failed("admin login attempt not counted", error)
        return None
    if since is None:
        return 1
    return max(1, math.ceil(since + rate.period - now))


def _attempt_release(key: str, rate: Rate | None) -> None:
    """Take back an attempt :func:`_attempt_reserve` counted: the password was right (or never
    checked)."""
    if rate is None or cache_away():
        return
    try:
        cache.decr(f"{key}:failures")
    except ValueError:  # the window ended meanwhile, and its count with it
        pass
    except Exception as error:  # the cache's own failure (Redis down or hung)
        cache_failed("admin login attempt not taken back", error)
