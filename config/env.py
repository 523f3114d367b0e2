"""Typed readers for the environment variables that configure the project.

Every setting has an embedded default so a fresh machine needs no configuration;
a value that is present but malformed is a start-up error naming the variable.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str, *, environ: Mapping[str, str] = os.environ) -> str:
    return environ.get(name, default)


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] = os.environ) -> bool:
    raw = environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(
    name: str, default: int, *, minimum: int | None = None, environ: Mapping[str, str] = os.environ
) -> int:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_list(
    name: str, default: list[str], *, environ: Mapping[str, str] = os.environ
) -> list[str]:
    raw = environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


@dataclass(frozen=True)
class Rate:
    """``count`` per ``period`` seconds."""

    count: int
    period: int

    def __str__(self) -> str:
        return f"{self.count}/{_UNITS[self.period]}"


_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNITS = {seconds: letter for letter, seconds in _PERIODS.items()}


def env_rate(name: str, default: str, *, environ: Mapping[str, str] = os.environ) -> Rate | None:
    """A rate such as ``120/m`` (per ``s``, ``m``, ``h`` or ``d``); ``None`` (no limit) for an
    empty value or ``0``."""
    raw = environ.get(name, default).strip()
    if raw in {"", "0"}:
        return None
    match = re.fullmatch(r"(\d+)/([smhd])", raw)
    if match is None:
        raise ImproperlyConfigured(
            f"{name} must be a rate such as 120/m (per s, m, h or d), got {raw!r}"
        )
    count = int(match.group(1))
    return Rate(count, _PERIODS[match.group(2)]) if count else None


def env_options(name: str, *, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``key=value,key=value`` as a dict; empty when unset."""
    options: dict[str, str] = {}
    for item in env_list(name, [], environ=environ):
        key, separator, value = item.partition("=")
        if not separator or not key.strip():
            raise ImproperlyConfigured(
                f"{name} must be key=value pairs separated by commas, got {item!r}"
            )
        options[key.strip()] = value.strip()
    return options


def env_named_options(
    names: Mapping[str, str], *, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """Engine options from their own variables (``{"SAM2_DEVICE": "device"}``), those set only."""
    values = {option: environ.get(name, "").strip() for name, option in names.items()}
    return {option: value for option, value in values.items() if value}


def secret_key_load(*, environ: Mapping[str, str] = os.environ, path: Path) -> str:
    """Return ``SECRET_KEY`` from the environment, else from ``path``.

    In the embedded default the key is generated once and kept in ``path`` (owner-only
    permissions), so sessions survive restarts and no secret ever sits in the repository.
    """
    from_env = environ.get("SECRET_KEY", "").strip()
    if from_env:
        return from_env
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    # O_EXCL: when two processes start at once, exactly one writes the key and both read it.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key + "\n")
    return key


def database_config(url: str, *, sqlite_path: Path) -> dict[str, Any]:
    """Django ``DATABASES["default"]`` for ``DATABASE_URL``; SQLite at ``sqlite_path`` if empty."""
    if not url.strip():
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(sqlite_path),
            # Several async consumers and the sync thread pool share the file: wait, don't fail.
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                # WAL lets readers run beside the writer; NORMAL sync is safe with WAL.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    if not url.startswith(("postgres://", "postgresql://")):
        scheme = url.split(":", 1)[0]
        raise ImproperlyConfigured(
            f"DATABASE_URL must be a postgres:// or postgresql:// URL, got scheme {scheme!r}"
        )
    return dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)


CACHE_TIMEOUT_SEC = 1.0  # a cache call to Redis gives up after this long


def caches_config(redis_url: str) -> dict[str, Any]:
    """Django's ``CACHES``, where the per-client rate limits are counted: Redis, shared by every
    process, when ``REDIS_URL`` is set, else each process's memory. A Redis that does not answer
    within :data:`CACHE_TIMEOUT_SEC` fails the call, and is then not asked for a while
    (``core/cache_outage.py``)."""
    if not redis_url.strip():
        return {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    timeouts = {"socket_timeout": CACHE_TIMEOUT_SEC, "socket_connect_timeout": CACHE_TIMEOUT_SEC}
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis_url,
            "OPTIONS": timeouts,
        }
    }


def channel_layers_config(redis_url: str) -> dict[str, Any]:
    """Channels ``CHANNEL_LAYERS``: Redis when ``REDIS_URL`` is set, else in-process memory."""
    if not redis_url.strip():
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    if not redis_url.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(
            f"REDIS_URL must be a redis://, rediss:// or unix:// URL, got {redis_url!r}"
        )
    # channels_redis waits for a message with BZPOPMIN for 5 s, and redis-py gives up reading
    # an answer after its default socket timeout, also 5 s: when the client gives up first, a
    # message that came in that moment is popped on the server and lost. Reads wait longer.
    host = {"address": redis_url, "socket_timeout": 15}
    return {
        "default": {
            "BACKEND": "edge.channel_layer.OneTripRedisChannelLayer",
            "CONFIG": {"hosts": [host], "channel_capacity": {"segmentation.*": 1000}},
        }
    }
