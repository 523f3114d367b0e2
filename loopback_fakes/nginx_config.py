"""docs/deploy.md's nginx blocks, read from the page, and the HLS cache they configure as an
nginx.conf for loopback in front of one origin, so that tests and benchmarks run what the page
says and the two cannot drift apart."""

from __future__ import annotations

import collections
import os
import re
import time
from pathlib import Path

DEPLOY_PAGE = Path(__file__).resolve().parent.parent / "docs" / "deploy.md"


def loopback_conf(work: Path, *, http: str, main: str = "", events: str = "") -> str:
    """An nginx.conf that runs in the foreground, as whoever starts it, with all it writes (pid,
    logs, temporary files) in ``work``: ``main``'s directives, ``events``' and ``http``'s."""
    return f"""
daemon off;
{main}
pid {work}/nginx.pid;
error_log {work}/error.log;
worker_processes 1;
events {{ {events} }}
http {{
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
{http}
}}
"""


def documented_blocks(heading: str) -> tuple[str, str]:
    """The two nginx blocks of docs/deploy.md's section ``heading``: for ``http`` and
    ``server``."""
    text = DEPLOY_PAGE.read_text(encoding="utf-8")
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```nginx\n(.*?)```", section, re.DOTALL)
    if len(blocks) != 2:
        raise ValueError(f"docs/deploy.md's {heading!r} holds {len(blocks)} nginx blocks, not 2")
    return blocks[0], blocks[1]


def hls_cache_configuration(work: Path, *, port: int, origin: int, segment_secret: str) -> str:
    """nginx on ``port`` caching ``/hls/`` as the page says, in front of the origin on
    ``origin`` (whose CHANNELS_SEGMENT_SECRET is ``segment_secret``); its cache, secret file,
    log (one line a request: URI, cache status, status, upstream) and pid in ``work``."""
    http, server = documented_blocks("HLS behind nginx or a CDN")
    http = http.replace("/var/cache/nginx/hls", str(work / "cache"))
    secret_file = work / "hls-segment-secret.conf"
    secret_file.write_text(f'set $segment_secret "{segment_secret}";\n')
    server = server.replace("/etc/nginx/hls-segment-secret.conf", str(secret_file))
    # the documented backup is a second process; here the one origin stands for both
    http = http.replace("127.0.0.1:8001", f"127.0.0.1:{origin}")
    http = http.replace("127.0.0.1:8002", f"127.0.0.1:{origin}")
    # nginx started by root runs its workers as nobody, who may not write the test's cache
    user = "user root;" if os.geteuid() == 0 else ""
    return loopback_conf(
        work,
        main=f"{user}\nworker_rlimit_nofile 16384;",
        events="worker_connections 8192;",
        http=f"""    log_format origin '$request_uri $upstream_cache_status $status $upstream_addr';
    access_log {work}/access.log origin;
    log_subrequest on;  # the playlist's background updates are subrequests
{http}
    server {{
        listen 127.0.0.1:{port};
        location = /healthz {{ proxy_pass http://127.0.0.1:{origin}; }}
{server}
    }}""",
    )


def origin_requests(work: Path, *, after: int = 0) -> collections.Counter[str]:
    """How many requests for each URI the HLS cache in ``work`` passed to the origin (the rest
    it served from its cache), in its log's lines from ``after`` on."""
    counts: collections.Counter[str] = collections.Counter()
    for line in log_lines(work)[after:]:
        uri, _cache_status, _status, upstream = line.split(" ", 3)
        if upstream != "-":
            counts[uri] += 1
    return counts


def answered_here(work: Path, *, after: int = 0) -> list[tuple[str, int]]:
    """The requests the HLS cache in ``work`` answered without the origin or its cache (a
    refused signature, a name that is no segment's): URI and status, in its log's order."""
    answered = []
    for line in log_lines(work)[after:]:
        uri, cache_status, status, upstream = line.split(" ", 3)
        if upstream == "-" and cache_status == "-":
            answered.append((uri, int(status)))
    return answered


def log_lines(work: Path, *, at_least: int = 0, timeout: float = 5.0) -> list[str]:
    """The lines of the HLS cache's log in ``work``. nginx writes a request's line after it
    has answered it: with ``at_least``, they are read again until that many are there (for at
    most ``timeout`` seconds; then as they are)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = (work / "access.log").read_text().splitlines()
        if len(lines) >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)
