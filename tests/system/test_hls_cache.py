"""The HLS output behind the cache docs/deploy.md configures, for real: nginx with
``proxy_cache`` and ``proxy_cache_lock`` in front of a server playing its demo channel. Many
clients at once cost the origin one request per segment. The nginx configuration is read from
the documentation, so the two cannot drift apart."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import re
import threading
import time

import requests

from channels_admin.streaming.segment_signature import SegmentSigner
from loopback_fakes.nginx_config import log_lines, origin_requests
from tests.channels_admin.stream_client import select, status, wait_until
from tests.system.hls_front import hls_front_started
from tests.system.test_deployment_topology import nginx_binary  # noqa: F401

CLIENTS = 50
# every playlist's segments are signed (link 0 while the stream is open): nginx checks them
SEGMENT = re.compile(r"^(seg-[0-9a-f]{8}-\d+\.ts)\?l=0&e=\d+&s=[A-Za-z0-9_-]{22}$", re.MULTILINE)
SECRET = "test-segment-secret-0123456789abcdefghij"


def test_many_hls_clients_cost_the_origin_one_request_per_segment(nginx_binary, tmp_path):  # noqa: F811
    with contextlib.ExitStack() as stack:
        started = hls_front_started(stack, nginx_binary, tmp_path, segment_secret=SECRET)
        front, origin, work = started.front, started.origin, started.work
        select(origin, "demo.1")

        def newest(server: str = front) -> str:
            text = requests.get(f"{server}/hls/live.m3u8", timeout=5).text
            uris = [line for line in text.splitlines() if SEGMENT.match(line)]
            return uris[-1] if uris else ""

        wait_until(newest, timeout=15, what="a first segment")
        seen = newest()
        wait_until(lambda: newest() != seen, timeout=10, what="a new segment")
        mark = len(log_lines(work))
        start = threading.Barrier(CLIENTS)

        def client(_: int) -> tuple[str, int, bytes]:
            start.wait()  # all at once, as players that loaded the same playlist would
            playlist = requests.get(f"{front}/hls/live.m3u8", timeout=10)
            uri = [line for line in playlist.text.splitlines() if SEGMENT.match(line)][-1]
            segment = requests.get(f"{front}/hls/{uri}", timeout=10)
            return uri.split("?")[0], segment.status_code, segment.content

        began = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            answers = list(pool.map(client, range(CLIENTS)))
        seconds = time.monotonic() - began
        log_lines(work, at_least=mark + 2 * CLIENTS)  # each client's playlist and segment
        counts = origin_requests(work, after=mark)
        # once the clients' segment is no longer the newest, it is one of those whose clients
        # the origin counts as HLS viewers
        names = {name for name, _, _ in answers}
        wait_until(lambda: newest(origin).split("?")[0] not in names, what="the next segment")
        hls_viewers = status(origin)["hls_viewers"]

    assert {code for _, code, _ in answers} == {200}
    # a segment that came out during the burst may be some clients' newest: one or two names
    assert len(names) in (1, 2)
    assert len({content for _, _, content in answers}) == len(names)
    per_segment = collections.Counter()
    for uri, count in counts.items():
        if uri.startswith("/hls/seg-"):
            per_segment[uri.split("?")[0]] += count
    assert per_segment == {f"/hls/{name}": 1 for name in names}
    # the playlist: once when the burst found it expired, then at most once a second
    assert counts["/hls/live.m3u8"] <= 1 + seconds
    assert hls_viewers == 1  # the origin saw one client: the cache


MISSING_REQUESTS = 500


def test_missing_segments_and_other_names_cost_the_origin_little(nginx_binary, tmp_path):  # noqa: F811
    # Before, nginx kept no 404 (the origin's are no-store): 2,000 random segment names all
    # reached the origin. Nothing need play: the origin answers 404 for a name it never cut.
    # signed, as nginx wants: the origin answers the 404
    name = "seg-0badf00d-7.ts"
    missing = (
        f"/hls/{name}?{SegmentSigner(secret=SECRET).query(name, link=0, now=time.time(), ttl=60)}"
    )
    others = [f"/hls/{n}.ts" for n in range(MISSING_REQUESTS // 5)] + ["/hls/live.ts"]
    with contextlib.ExitStack() as stack:
        started = hls_front_started(stack, nginx_binary, tmp_path, segment_secret=SECRET)
        front, work = started.front, started.work
        mark = len(log_lines(work))

        def get(path: str) -> int:
            with requests.Session() as session:
                return session.get(f"{front}{path}", timeout=10).status_code

        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            answers = collections.Counter(pool.map(get, [missing] * MISSING_REQUESTS + others))
        log_lines(work, at_least=mark + MISSING_REQUESTS + len(others))
        # only the HLS names: nginx may log the readiness probe's /healthz after the mark
        counts = collections.Counter(
            {u: n for u, n in origin_requests(work, after=mark).items() if u.startswith("/hls/")}
        )

    # then every request is answered 404, the missing segment's from the origin once (within
    # its 5 s), and no other name reaches the origin at all
    assert answers == {404: MISSING_REQUESTS + len(others)}
    assert counts == {missing: 1}
