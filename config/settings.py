"""Django settings, read from environment variables with embedded defaults.

With nothing set, the project runs self-contained: SQLite, media and a generated
secret key under ``var/``, and the in-memory channel layer. ``DATABASE_URL`` and
``REDIS_URL`` switch to PostgreSQL and Redis. ``.env.example`` lists every variable.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ImproperlyConfigured

from config.env import (
    caches_config,
    channel_layers_config,
    database_config,
    env_bool,
    env_int,
    env_list,
    env_named_options,
    env_options,
    env_rate,
    env_str,
    secret_key_load,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = secret_key_load(path=VAR_DIR / "secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Proxies whose X-Forwarded-For names the client (addresses or networks); the client's address
# keys the per-client limits (core/client_address.py). Only this machine by default.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", ["127.0.0.1", "::1"])
for _proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"TRUSTED_PROXIES must list IP addresses or networks, got {_proxy!r}"
        ) from None

INSTALLED_APPS = [
    # First, so that `runserver` serves the ASGI application.
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "corsheaders",
    "channels",
    "graphene_django",
    "segmentation",
    "channels_admin",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "corsheaders.middleware.CorsMiddleware",
    "edge.cross_site.CrossSiteRefusal",
    "core.server_timing.ServerTimingMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": database_config(env_str("DATABASE_URL", ""), sqlite_path=VAR_DIR / "db.sqlite3")
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL", "")
CHANNEL_LAYERS = channel_layers_config(REDIS_URL)
CACHES = caches_config(REDIS_URL)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# Front-end packages fetched from the npm registry by `scripts/fetch_assets.py`.
VENDOR_DIR = BASE_DIR / "vendor"
STATICFILES_DIRS = [BASE_DIR / "static", ("vendor", VENDOR_DIR)]
# Serve /static/ from the ASGI application itself: right for one process on a laptop;
# behind a reverse proxy set SERVE_STATIC=0 and let the proxy serve `collectstatic` output.
SERVE_STATIC = env_bool("SERVE_STATIC", True)

MEDIA_URL = "media/"
MEDIA_ROOT = VAR_DIR / "media"

# The SAM 2 demo frontend calls the API cross-origin with `credentials: include`.
CORS_ALLOWED_ORIGINS = env_list("CORS_ALLOWED_ORIGINS", [])
CORS_ALLOWED_ORIGIN_REGEXES = (
    [] if CORS_ALLOWED_ORIGINS else [r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$"]
)
CORS_ALLOW_CREDENTIALS = True
# Let cross-origin pages (the SAM 2 demo) read how long the engine took.
CORS_EXPOSE_HEADERS = ["Server-Timing"]
# The channel admin API is never for other origins.
CORS_URLS_REGEX = r"^(?!/api/admin/).*$"

# Limits on one GraphQL request (edge/graphql_limits.py); introspection off hides the schema
# from clients (and from GraphiQL).
GRAPHQL_MAX_DEPTH = env_int("GRAPHQL_MAX_DEPTH", 10, minimum=1)
GRAPHQL_MAX_FIELDS = env_int("GRAPHQL_MAX_FIELDS", 300, minimum=1)
GRAPHQL_MAX_ROOT_FIELDS = env_int("GRAPHQL_MAX_ROOT_FIELDS", 10, minimum=1)
GRAPHQL_MAX_TOKENS = env_int("GRAPHQL_MAX_TOKENS", 5000, minimum=100)
GRAPHQL_INTROSPECTION = env_bool("GRAPHQL_INTROSPECTION", True)
# What one request may cost the engine (segmentation/graphql/cost.py): each root field 1, each
# engine call 4 more, each point 4, each frame it touches 8.
GRAPHQL_MAX_COST = env_int("GRAPHQL_MAX_COST", 100, minimum=1)
# Per-client limits (core/rate_limits.py), "count/period" with s, m, h or d; empty or 0: none.
# The cost limit counts what each mutation request costs (as GRAPHQL_MAX_COST reckons it, a click
# 17, refused requests too), each propagation started (17) and the plain endpoints' work
# (segmentation/graphql/cost.py: annotation files, exports, receipts); the uploads limit, every
# request that uploads a video or annotations.
RATE_LIMIT_COST = env_rate("RATE_LIMIT_COST", "3000/m")
RATE_LIMIT_UPLOADS = env_rate("RATE_LIMIT_UPLOADS", "60/h")
# Messages one WebSocket connection may send (taken by edge/websocket_close.py): a bucket of
# count, refilled at count per period; past it the connection is closed with 1008. Empty or 0:
# none.
WEBSOCKET_MESSAGE_BUDGET = env_rate("WEBSOCKET_MESSAGE_BUDGET", "10/m")
# New WebSocket connections one client address may open (taken by the server at the upgrade,
# edge/websocket_admission.py): a burst of count, earned back at count per period; and how many
# it may hold open at once. Past either, 429 with Retry-After. Empty or 0: none.
WEBSOCKET_CONNECTS_PER_CLIENT = env_rate("WEBSOCKET_CONNECTS_PER_CLIENT", "30/m")
WEBSOCKET_OPEN_PER_CLIENT = env_int("WEBSOCKET_OPEN_PER_CLIENT", 30, minimum=0)

GRAPHENE = {
    "SCHEMA": "edge.schema.schema",
    # `manage.py graphql_schema` rewrites the committed SDL; a test fails when they drift.
    "SCHEMA_OUTPUT": str(BASE_DIR / "schema.graphql"),
}

# Where `manage.py sam2_weights fetch` puts the official SAM 2 and EdgeTAM checkpoints, and where
# SAM2_CHECKPOINT=tiny (a size, an official file's stem, or edgetam) finds them.
SAM2_MODELS_DIR = Path(env_str("SAM2_MODELS_DIR", "") or VAR_DIR / "models").resolve()
# The fetch's wait before its first retry of a connection that failed, doubled for each next.
SAM2_FETCH_RETRY_MS = env_int("SAM2_FETCH_RETRY_MS", 250, minimum=0)
# The engine behind the segmentation API, and its options (checked at start-up). Unset: "auto",
# which the segmentation app resolves at start-up (segmentation/services/process_engine.py): a
# learned checkpoint in the models folder that fits this machine, else classic (engines/choice.py).
SEGMENTATION_ENGINE = env_str("SEGMENTATION_ENGINE", "") or "auto"
SEGMENTATION_ENGINE_OPTIONS = env_options("SEGMENTATION_ENGINE_OPTIONS")
# With the sam2 engine (set, or chosen), its options from their own variables, after the models
# folder and the checkpoint chosen; SEGMENTATION_ENGINE_OPTIONS wins.
SAM2_ENGINE_OPTIONS = env_named_options(
    {
        "SAM2_CHECKPOINT": "checkpoint",
        "SAM2_MODEL_SIZE": "model_size",
        "SAM2_DEVICE": "device",
        "SAM2_PRECISION": "precision",
        "SAM2_COMPILE": "compile",
        "SAM2_COMPILE_MODE": "compile_mode",
    }
)
# The video `defaultVideo` answers with; unset: one drawn at set-up (gallery/default.mp4).
DEFAULT_VIDEO_PATH = env_str("DEFAULT_VIDEO_PATH", "")
# Stored videos are H.264 MP4 at 24 fps with their longest side at most this.
MAX_VIDEO_SIDE = env_int("MAX_VIDEO_SIDE", 1280, minimum=64)
# Slow clients (edge/server.py): a request's head must arrive whole within this many seconds
# of the connection's start or the previous answer's end (an idle connection is closed then); a
# body must bring a byte every SERVER_BODY_IDLE_SEC and, after its first SERVER_BODY_IDLE_SEC,
# average SERVER_BODY_MIN_RATE bytes a second (0: no minimum); past either, 408 and closed.
SERVER_HEAD_TIMEOUT_SEC = env_int("SERVER_HEAD_TIMEOUT_SEC", 10, minimum=1)
SERVER_BODY_IDLE_SEC = env_int("SERVER_BODY_IDLE_SEC", 10, minimum=1)
SERVER_BODY_MIN_RATE = env_int("SERVER_BODY_MIN_RATE", 1024, minimum=0)
# Bodies refused at their head are still read and dropped (so that the client reads the answer),
# all of them together at most this many MB a second (edge/body_limit.py).
SERVER_REFUSED_DRAIN_MB = env_int("SERVER_REFUSED_DRAIN_MB", 16, minimum=1)
# Uploads: refused while arriving past this size; videos cut to this many seconds. An hour of
# ordinary 854x480 H.264 (1 to 2 Mbit/s) is 450 to 900 MB.
MAX_UPLOAD_BYTES = env_int("MAX_UPLOAD_MB", 1024, minimum=1) * 1024 * 1024
MAX_UPLOAD_DURATION_SEC = env_int("MAX_UPLOAD_DURATION_SEC", 3600, minimum=1)
# Annotation files (uploadAnnotations, the import and the exports): refused past this size before
# they are parsed (segmentation/annotation_json.py). 10 s of video at 24 fps with 20 objects, at
# about 1.5 KB of RLE per mask (a 1280-pixel-wide shape), is 7.2 MB.
MAX_ANNOTATIONS_BYTES = env_int("MAX_ANNOTATIONS_MB", 8, minimum=1) * 1024 * 1024
# Uploads whose pictures are larger than this (4K: 4096x2160), or that carry more pixels a second
# than this (4K at 60 frames a second), are refused from their header, before any frame is
# decoded: a header may claim any size, and each decoded frame costs memory and time in
# proportion (an 8K frame is 50 MB in the decoder; 16 at once took 7 GB).
MAX_UPLOAD_PIXELS = env_int("MAX_UPLOAD_PIXELS", 4096 * 2160, minimum=1)
MAX_UPLOAD_PIXEL_RATE = env_int("MAX_UPLOAD_PIXEL_RATE", 4096 * 2160 * 60, minimum=1)
# Uploads decoded at once (segmentation/services/transcode_slots.py), how many more may wait (in
# the order they came), and for how long; past either, SERVER_BUSY. A gallery upload is prepared
# in the background (segmentation/services/preparations.py): as many at once, in processes of
# their own, with as many more waiting; past them, or past UPLOADS_PER_CLIENT unfinished ones of
# one client, SERVER_BUSY.
MAX_PARALLEL_TRANSCODES = env_int(
    "MAX_PARALLEL_TRANSCODES", max(1, (os.cpu_count() or 2) // 2), minimum=1
)
MAX_QUEUED_TRANSCODES = env_int("MAX_QUEUED_TRANSCODES", 8, minimum=0)
TRANSCODE_WAIT_SEC = env_int("TRANSCODE_WAIT_SEC", 120, minimum=1)
UPLOADS_PER_CLIENT = env_int("UPLOADS_PER_CLIENT", 2, minimum=1)
# A preparation's process may take at most this much memory (its address space); past it, the
# preparation fails. Its server says every few seconds that it still holds it; one that has not
# for this many seconds (it was restarted, or died) is taken up again, by it or another.
PREPARATION_MEMORY_MB = env_int("PREPARATION_MEMORY_MB", 1536, minimum=256)
PREPARATION_LEASE_SEC = env_int("PREPARATION_LEASE_SEC", 15, minimum=1)
# A propagation job whose process has been silent this long (restarted, crashed, killed) is taken
# up by the next process that runs sessions; each says every third of it that its jobs still run.
PROPAGATION_JOB_LEASE_SEC = env_int("PROPAGATION_JOB_LEASE_SEC", 15, minimum=1)
# A job keeps what its engine carries to the next frame this often (in frames), so that one taken
# up computes at most this many frames again.
PROPAGATION_JOB_CARRY_FRAMES = env_int("PROPAGATION_JOB_CARRY_FRAMES", 240, minimum=1)
# Exports converted at once, each in a process of its own (segmentation/services/exports.py), and
# how many more may wait their turn; past them, SERVER_BUSY.
EXPORT_PROCESSES = env_int("EXPORT_PROCESSES", max(1, (os.cpu_count() or 2) // 2), minimum=1)
EXPORTS_QUEUED = env_int("EXPORTS_QUEUED", 8, minimum=0)
# Disk the stored uploads and shared videos may take together; past it, STORAGE_FULL.
MEDIA_QUOTA_BYTES = env_int("MEDIA_QUOTA_MB", 10240, minimum=1) * 1024 * 1024
TERMS_OF_SERVICE_VERSION = env_str("TERMS_OF_SERVICE_VERSION", "2024-07-29")
# A browser's cookie session (a client's deletion ID, a staff login) expires this long after its
# last change; `manage.py purge_expired` then deletes it, and its deletion IDs if they own nothing.
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_DAYS", 14, minimum=1) * 24 * 3600
# Failed logins to /admin/ (edge/admin_login.py), "count/period" with s, m, h or d: the first
# failure opens a period, and past count failures in it logins from that client address, or for
# that username, wait for its end; empty or 0: no limit.
ADMIN_LOGIN_FAILURES_PER_ADDRESS = env_rate("ADMIN_LOGIN_FAILURES_PER_ADDRESS", "10/h")
ADMIN_LOGIN_FAILURES_PER_USERNAME = env_rate("ADMIN_LOGIN_FAILURES_PER_USERNAME", "30/h")
# Admin login passwords checked at once in a process (each a PBKDF2 hash, ~0.3 s of a core), and
# how many more may wait for their turn; past them, 503 and Retry-After, unchecked.
ADMIN_LOGIN_PARALLEL_CHECKS = env_int("ADMIN_LOGIN_PARALLEL_CHECKS", 1, minimum=1)
ADMIN_LOGIN_QUEUED_CHECKS = env_int("ADMIN_LOGIN_QUEUED_CHECKS", 16, minimum=0)
SESSION_IDLE_TIMEOUT_SEC = env_int("SESSION_IDLE_TIMEOUT_SEC", 900, minimum=1)
MAX_SESSIONS = env_int("MAX_SESSIONS", 32, minimum=1)
# Sessions one client (its address, core/client_address.py) may hold at once; 0: no cap.
MAX_SESSIONS_PER_CLIENT = env_int("MAX_SESSIONS_PER_CLIENT", 8, minimum=0)
# Engine time a session's prompts may take (segmentation/services/engine_budget.py): bursts of
# this many seconds, refilled at this share of a core; 0 in either turns the budget off.
SESSION_ENGINE_BURST_SEC = env_int("SESSION_ENGINE_BURST_SEC", 30, minimum=0)
SESSION_ENGINE_SHARE = env_int("SESSION_ENGINE_SHARE_PERCENT", 25, minimum=0) / 100
# Engine calls run at once in a process (segmentation/services/engine_turns.py), 0: as many as
# the engine says this machine's cores run at once; the next free turn goes to the waiting client
# that held the engine least lately (its engine seconds, decaying by 1/e every
# ENGINE_FAIR_MEMORY_SEC). Calls that may wait for a turn, in all and of one client (0: no cap of
# its own); past either, SERVER_BUSY. A session waits with one call at most, so by default the
# line is as long as the sessions may be many.
ENGINE_PARALLEL_CALLS = env_int("ENGINE_PARALLEL_CALLS", 0, minimum=0)
ENGINE_QUEUED_CALLS = env_int("ENGINE_QUEUED_CALLS", MAX_SESSIONS, minimum=1)
ENGINE_QUEUED_CALLS_PER_CLIENT = env_int(
    "ENGINE_QUEUED_CALLS_PER_CLIENT", MAX_SESSIONS_PER_CLIENT, minimum=0
)
ENGINE_FAIR_MEMORY_SEC = env_int("ENGINE_FAIR_MEMORY_SEC", 10, minimum=1)
# Sessions in inference workers (`manage.py segmentation_worker`, docs/deploy.md): this process
# then holds no engine and routes every session's operations to its worker through Redis.
SEGMENTATION_WORKERS = env_bool("SEGMENTATION_WORKERS", False)
if SEGMENTATION_WORKERS and not REDIS_URL:
    raise ImproperlyConfigured("SEGMENTATION_WORKERS needs REDIS_URL (the workers' registry)")
SEGMENTATION_WORKERS_PREFIX = env_str("SEGMENTATION_WORKERS_PREFIX", "segmentation-workers")
# A worker that stops renewing its registration is dropped this long after (it renews 4x as often).
SEGMENTATION_WORKER_TTL_SEC = env_int("SEGMENTATION_WORKER_TTL_SEC", 4, minimum=1)
# Decoded frames each session keeps (stored videos have a key frame every second, so a frame
# that dropped out costs at most a second of decoding).
SESSION_FRAME_CACHE_MB = env_int("SESSION_FRAME_CACHE_MB", 64, minimum=1)
# The annotator page's frames: decoded once per video and kept as JPEG files here.
FRAME_IMAGE_DIR = Path(env_str("FRAME_IMAGE_DIR", "") or VAR_DIR / "frames").resolve()
FRAME_IMAGE_QUALITY = env_int("FRAME_IMAGE_QUALITY", 90, minimum=1)
# Disk they may take; past it, the folders of the videos least recently used are deleted.
FRAME_IMAGE_QUOTA_BYTES = env_int("FRAME_IMAGE_QUOTA_MB", 2048, minimum=1) * 1024 * 1024

# The IPTV channel admin.
LISTEN_PORT = env_int("LISTEN_PORT", 7263, minimum=1)
# How this server reaches itself: the built-in demo channels of the default playlist live here.
SERVER_URL = env_str("SERVER_URL", f"http://127.0.0.1:{LISTEN_PORT}").rstrip("/")
# Unset (and no URL): the default playlist of demo channels, written once to this file.
CHANNELS_DEFAULT_PLAYLIST_PATH = VAR_DIR / "playlist.m3u"
CHANNELS_PLAYLIST_PATH = env_str("CHANNELS_PLAYLIST_PATH", "")
CHANNELS_PLAYLIST_URL = env_str("CHANNELS_PLAYLIST_URL", "")
CHANNELS_PLAYLIST_MAX_BYTES = env_int("CHANNELS_PLAYLIST_MAX_MB", 50, minimum=1) * 1024 * 1024
CHANNELS_PLAYLIST_TIMEOUT_SEC = env_int("CHANNELS_PLAYLIST_TIMEOUT_SEC", 30, minimum=1)
# The default playlist's two demo channels, listed after a configured playlist's own entries
# too (group "Demo"), so that one channel is always known to work.
CHANNELS_DEMO = env_bool("CHANNELS_DEMO", True)
CHANNELS_ADMIN_TOKEN = env_str("CHANNELS_ADMIN_TOKEN", "")
# Private viewer links that admit viewers (not revoked) at most: each costs the access rule a
# row that every process reads at each change.
CHANNELS_MAX_VIEWER_LINKS = env_int("CHANNELS_MAX_VIEWER_LINKS", 1000, minimum=1)
# The secret of the HLS segment URIs' signatures (channels_admin/streaming/segment_signature.py),
# which nginx checks too (docs/deploy.md): set it to give nginx the same. By default derived
# from SECRET_KEY, apart from its other uses. Put in nginx's config as it is, so of characters
# that need no quoting there.
CHANNELS_SEGMENT_SECRET = (
    env_str("CHANNELS_SEGMENT_SECRET", "")
    or hmac.new(SECRET_KEY.encode(), b"channels-hls-segment-links", hashlib.sha256).hexdigest()
)
if not re.fullmatch(r"[A-Za-z0-9_-]{32,128}", CHANNELS_SEGMENT_SECRET):
    raise ImproperlyConfigured(
        "CHANNELS_SEGMENT_SECRET must be 32 to 128 of A-Z a-z 0-9 _ - (such as the output of "
        "python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
    )
# Addresses the hub never opens an upstream connection to (channels_admin/streaming/
# upstream_addresses.py), networks or single addresses: loopback by default; this machine's own
# addresses and 0.0.0.0 are refused besides. CHANNELS_UPSTREAM_ALLOW names networks fetched all
# the same (a provider on this machine, or a source on the local network); the server's demo
# channels are always fetched.
CHANNELS_UPSTREAM_DENY = tuple(
    ipaddress.ip_network(network, strict=False)
    for network in env_list("CHANNELS_UPSTREAM_DENY", ["127.0.0.0/8", "::1"])
)
CHANNELS_UPSTREAM_ALLOW = tuple(
    ipaddress.ip_network(network, strict=False)
    for network in env_list("CHANNELS_UPSTREAM_ALLOW", [])
)
CHANNELS_UPSTREAM_CONNECT_TIMEOUT_SEC = env_int(
    "CHANNELS_UPSTREAM_CONNECT_TIMEOUT_SEC", 5, minimum=1
)
# A source that sends nothing for this many seconds has failed: the hub fails over.
CHANNELS_STALL_TIMEOUT = env_int("CHANNELS_STALL_TIMEOUT", 5, minimum=1)
# While no source plays, viewers get a "RECONNECTING" test pattern (encoded here, a share of a
# core); off: null packets, which keep the connection but not the screen.
CHANNELS_SLATE = env_bool("CHANNELS_SLATE", True)
# A switch whose channel shows no picture within this many seconds goes back to the channel
# that played before it.
CHANNELS_SWITCH_TIMEOUT_SEC = env_int("CHANNELS_SWITCH_TIMEOUT_SEC", 10, minimum=1)
# A source whose picture stays frozen, or black, this many seconds has failed: the hub fails
# over (channels_admin/streaming/picture_watch.py); 0 turns the check off. It decodes one key
# frame every CHANNELS_PICTURE_CHECK_SEC to tell.
CHANNELS_FROZEN_SEC = env_int("CHANNELS_FROZEN_SEC", 20, minimum=0)
CHANNELS_BLACK_SEC = env_int("CHANNELS_BLACK_SEC", 10, minimum=0)
CHANNELS_PICTURE_CHECK_SEC = env_int("CHANNELS_PICTURE_CHECK_SEC", 1, minimum=1)
# A source whose sound stays silent this many seconds has failed too
# (channels_admin/streaming/audio_watch.py). Off (0) by default: a quiet programme is not a
# failure, so when on it must be long (30 s or more).
CHANNELS_SILENT_SEC = env_int("CHANNELS_SILENT_SEC", 0, minimum=0)
# With REDIS_URL, several server processes share one upstream connection
# (channels_admin/streaming/relay.py): the owner's Redis key expires this long after its process
# dies, and another takes over.
CHANNELS_RELAY_LOCK_SEC = env_int("CHANNELS_RELAY_LOCK_SEC", 6, minimum=1)
CHANNELS_RELAY_PREFIX = env_str("CHANNELS_RELAY_PREFIX", "channels-hub")
CHANNELS_VIEWER_BUFFER_BYTES = env_int("CHANNELS_VIEWER_BUFFER_KB", 1024, minimum=64) * 1024
# An HLS master playlist's variant: the highest BANDWIDTH (bits/s) up to this; empty: no cap.
# A new viewer starts at the last key frame: the picture group since it is kept, up to this size
# and age (channels_admin/streaming/gop_cache.py); 0 KB turns the cache off.
CHANNELS_GOP_CACHE_BYTES = env_int("CHANNELS_GOP_CACHE_KB", 8192, minimum=0) * 1024
CHANNELS_GOP_CACHE_SEC = env_int("CHANNELS_GOP_CACHE_SEC", 15, minimum=1)
CHANNELS_HLS_MAX_BANDWIDTH = env_int("CHANNELS_HLS_MAX_BANDWIDTH", 0, minimum=1) or None
# Viewers of /ts one server process carries at most; the next get 503 (unset or 0: no cap).
CHANNELS_MAX_VIEWERS = env_int("CHANNELS_MAX_VIEWERS", 0, minimum=0) or None
# A /ts (or demo channel) client whose socket takes nothing for this many seconds is cut off.
CHANNELS_STALLED_VIEWER_SEC = env_int("CHANNELS_STALLED_VIEWER_SEC", 60, minimum=1)
# Demo channel streams (/tv/demo/<n>.ts) one client may hold at once, of the 4 a process runs:
# the hub's own request for a demo channel must find one free.
CHANNELS_DEMO_STREAMS_PER_CLIENT = env_int("CHANNELS_DEMO_STREAMS_PER_CLIENT", 2, minimum=1)
# The programme guide (XMLTV; channels_admin/services/guide.py): fetched from these URLs (set
# by hand, comma-separated) and then from the playlist's url-tvg ones, every REFRESH_SEC (0: only
# when asked), each download and its XML (after gzip) at most MAX_MB, in at most TIMEOUT_SEC.
CHANNELS_GUIDE_URLS = env_list("CHANNELS_GUIDE_URL", [])
CHANNELS_GUIDE_REFRESH_SEC = env_int("CHANNELS_GUIDE_REFRESH_SEC", 6 * 3600, minimum=0)
CHANNELS_GUIDE_MAX_BYTES = env_int("CHANNELS_GUIDE_MAX_MB", 300, minimum=1) * 1024 * 1024
CHANNELS_GUIDE_TIMEOUT_SEC = env_int("CHANNELS_GUIDE_TIMEOUT_SEC", 120, minimum=1)
# What a guide may put in the database: past these, the rest is left out (and said so).
CHANNELS_GUIDE_MAX_CHANNELS = env_int("CHANNELS_GUIDE_MAX_CHANNELS", 50_000, minimum=1)
CHANNELS_GUIDE_MAX_PROGRAMMES = env_int("CHANNELS_GUIDE_MAX_PROGRAMMES", 2_000_000, minimum=1)
# Programmes that ended longer ago than this are not kept.
CHANNELS_GUIDE_KEEP_PAST_HOURS = env_int("CHANNELS_GUIDE_KEEP_PAST_HOURS", 6, minimum=0)
# The TV page's overlay (channel, programme now and next) fades this long after it shows.
CHANNELS_OVERLAY_SEC = env_int("CHANNELS_OVERLAY_SEC", 5, minimum=1)
# The schedule (channels_admin/services/schedule_runner.py): the time zone of its weekly times.
CHANNELS_SCHEDULE_TZ = env_str("CHANNELS_SCHEDULE_TZ", "") or TIME_ZONE
try:
    ZoneInfo(CHANNELS_SCHEDULE_TZ)
except (ValueError, ZoneInfoNotFoundError):
    raise ImproperlyConfigured(
        f"CHANNELS_SCHEDULE_TZ must be a time zone such as Europe/Berlin, got "
        f"{CHANNELS_SCHEDULE_TZ!r}"
    ) from None
# Entries the schedule holds at most (each is computed at every look of the runner).
CHANNELS_SCHEDULE_MAX_ENTRIES = env_int("CHANNELS_SCHEDULE_MAX_ENTRIES", 200, minimum=1)
# A switch made later than this was missed (the server was down): its entry says whether it is
# taken up or skipped.
CHANNELS_SCHEDULE_MISSED_SEC = env_int("CHANNELS_SCHEDULE_MISSED_SEC", 30, minimum=1)
# A missed switch whose slot has no end is taken up for this long at most.
CHANNELS_SCHEDULE_GRACE_SEC = env_int("CHANNELS_SCHEDULE_GRACE_SEC", 3600, minimum=1)
# With REDIS_URL, one process runs the schedule: the holder of the Redis key
# <CHANNELS_SCHEDULE_PREFIX>:runner, which outlives a dead holder by CHANNELS_SCHEDULE_LOCK_SEC.
CHANNELS_SCHEDULE_PREFIX = env_str("CHANNELS_SCHEDULE_PREFIX", "channels-schedule")
CHANNELS_SCHEDULE_LOCK_SEC = env_int("CHANNELS_SCHEDULE_LOCK_SEC", 6, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # A suspicious request (edge/log_lines.py) is one line, without its traceback.
    "filters": {"suspicious_in_one_line": {"()": "edge.log_lines.SuspiciousInOneLine"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["suspicious_in_one_line"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
}
