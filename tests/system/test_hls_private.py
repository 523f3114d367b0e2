"""Private viewing behind the HLS cache docs/deploy.md configures, for real: nginx (read from
the page) in front of a server playing its demo channel privately. nginx checks each segment's
signature itself (secure_link) before it looks in its cache: clients of two links, each with
its own signatures, cost the origin one request per segment, and a segment in the cache is not
served without a valid signature (none, tampered, another link's, expired), which never
reaches the origin."""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import threading
import time
from pathlib import Path

import pytest
import requests

from channels_admin.streaming.segment_signature import SegmentSigner
from loopback_fakes.nginx_config import answered_here, log_lines, origin_requests
from tests.channels_admin.stream_client import select, wait_until
from tests.system.hls_front import hls_front_started
from tests.system.test_deployment_topology import NGINX

CLIENTS = 40
SIGNED = re.compile(r"^(seg-[0-9a-f]{8}-\d+\.ts)\?(l=\d+&e=\d+&s=[A-Za-z0-9_-]+)$", re.MULTILINE)
SECRET = "test-segment-secret-0123456789abcdefghij"
NOT_VALID = (403, "this segment's link is not valid: reload the playlist\n")
EXPIRED = (410, "this segment's link has expired: reload the playlist\n")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """The origin (private, links "one" and "two") behind nginx: (front, origin, nginx's work
    folder, the links)."""
    if not Path(NGINX).exists():
        pytest.skip(f"nginx is not installed at {NGINX} (.ci/run installs it with apt)")
    tmp_path = tmp_path_factory.mktemp("hls-private")
    with contextlib.ExitStack() as stack:
        started = hls_front_started(stack, NGINX, tmp_path, segment_secret=SECRET)
        front, origin, work = started.front, started.origin, started.work
        select(origin, "demo.1")
        requests.post(f"{origin}/api/admin/private", json={"private": True}, timeout=10)
        links = [
            requests.post(f"{origin}/api/admin/links", json={"name": n}, timeout=10).json()
            for n in ("one", "two")
        ]
        wait_until(lambda: listed(front, links[0]["token"]), timeout=15, what="a first segment")
        yield front, origin, work, links


def listed(front: str, token: str) -> list[tuple[str, str]]:
    """The signed segment URIs of the playlist through the link of ``token``: (name, query)."""
    answer = requests.get(f"{front}/hls/live.m3u8", params={"t": token}, timeout=5)
    return SIGNED.findall(answer.text) if answer.status_code == 200 else []


def newer(front: str, token: str, than: str) -> str:
    """The first segment listed after ``than`` (its media sequence higher: a playlist nginx
    still serves from its cache may be older than the one ``than`` came from)."""

    def sequence(name: str) -> int:
        return int(name.rsplit("-", 1)[1].removesuffix(".ts"))

    wait_until(
        lambda: sequence(listed(front, token)[-1][0]) > sequence(than),
        timeout=10,
        what="a new segment",
    )
    return next(n for n, _ in listed(front, token) if sequence(n) > sequence(than))


def flipped(signature: str) -> str:
    """``signature`` with its first character changed (the last holds 2 bits only: some other
    characters there decode to the same bytes)."""
    return ("B" if signature[0] == "A" else "A") + signature[1:]


def test_private_hls_clients_of_two_links_cost_the_origin_one_request_per_segment(deployment):
    front, _origin, work, links = deployment
    tokens = [link["token"] for link in links]
    newer(front, tokens[0], listed(front, tokens[0])[-1][0])
    mark = len(log_lines(work))
    start = threading.Barrier(CLIENTS)

    def client(n: int) -> tuple[str, str, int]:
        start.wait()
        name, query = listed(front, tokens[n % 2])[-1]
        segment = requests.get(f"{front}/hls/{name}?{query}", timeout=10)
        return name, query, segment.status_code

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(client, range(CLIENTS)))
    log_lines(work, at_least=mark + 2 * CLIENTS)  # each client's playlist and segment
    counts = origin_requests(work, after=mark)
    no_link = requests.get(f"{front}/hls/live.m3u8", timeout=5)

    names = {name for name, _, _ in answers}
    queries = {query for _, query, _ in answers}
    assert {code for _, _, code in answers} == {200}
    assert len(names) in (1, 2)  # a segment may come out during the burst
    assert len(queries) >= 2  # two links: two signatures at least
    per_segment: dict[str, int] = {}
    for uri, count in counts.items():
        if uri.startswith("/hls/seg-"):
            path = uri.split("?")[0]
            per_segment[path] = per_segment.get(path, 0) + count
    assert per_segment == {f"/hls/{name}": 1 for name in names}
    assert answered_here(work, after=mark) == []  # every signature good
    assert (no_link.status_code, no_link.text) == (
        401,
        "this stream is private: open it with the link you were given",
    )


def test_nginx_serves_a_cached_segment_only_with_a_valid_signature(deployment):
    front, _origin, work, links = deployment
    one, two = links
    name, query = listed(front, one["token"])[-1]
    params = dict(pair.split("=", 1) for pair in query.split("&"))
    good = requests.get(f"{front}/hls/{name}?{query}", timeout=5)
    again = requests.get(f"{front}/hls/{name}?{query}", timeout=5)
    signer = SegmentSigner(secret=SECRET)
    past = int(time.time()) - 10
    # every one of these names a segment nginx has cached, with no valid signature for it
    attempts = {
        "none": "",
        "no signature": f"?l={params['l']}&e={params['e']}",
        "tampered": f"?l={params['l']}&e={params['e']}&s={flipped(params['s'])}",
        "another link's id": f"?l={two['id']}&e={params['e']}&s={params['s']}",
        "a later expiry": f"?l={params['l']}&e={int(params['e']) + 60}&s={params['s']}",
        "expired": f"?{signer.query(name, link=one['id'], now=past, ttl=0)}",
        "junk": "?l=%0a&e=99999999999999999999&s=" + "A" * 30,
    }
    mark = len(log_lines(work))
    answers = {
        what: requests.get(f"{front}/hls/{name}{suffix}", timeout=5)
        for what, suffix in attempts.items()
    }

    assert (good.status_code, again.status_code) == (200, 200)
    assert again.headers["X-Cache-Status"] == "HIT"
    assert again.content == good.content
    assert {what: (a.status_code, a.text) for what, a in answers.items()} == {
        "none": NOT_VALID,
        "no signature": NOT_VALID,
        "tampered": NOT_VALID,
        "another link's id": NOT_VALID,
        "a later expiry": NOT_VALID,
        "expired": EXPIRED,
        "junk": NOT_VALID,
    }
    # answered by nginx, none from the origin or the cache
    log_lines(work, at_least=mark + len(attempts))
    assert origin_requests(work, after=mark) == {}
    assert [status for _, status in answered_here(work, after=mark)] == [
        403,
        403,
        403,
        403,
        403,
        410,
        403,
    ]


def test_a_revoked_links_signature_is_refused_by_the_origin_on_a_miss(deployment):
    front, origin, work, links = deployment
    revoked = requests.post(
        f"{origin}/api/admin/links", json={"name": "to revoke"}, timeout=10
    ).json()
    name, query = listed(front, revoked["token"])[-1]
    requests.post(f"{origin}/api/admin/links/{revoked['id']}/revoke", timeout=10)
    # a segment no one fetched yet: nginx takes the signature (it cannot know of revocations)
    # and asks the origin, which refuses it; the refusal is not kept
    fresh = newer(front, links[0]["token"], name)
    signer = SegmentSigner(secret=SECRET)
    fresh_query = signer.query(fresh, link=revoked["id"], now=time.time(), ttl=12)
    mark = len(log_lines(work))
    wait_until(
        lambda: requests.get(f"{front}/hls/{fresh}?{fresh_query}", timeout=5).status_code == 403,
        timeout=3,
        what="the revoked link refused by the origin",
    )
    twice = requests.get(f"{front}/hls/{fresh}?{fresh_query}", timeout=5)

    assert (twice.status_code, twice.text) == (
        403,
        "this segment's link is not valid or has expired: reload the playlist",
    )
    # nginx logs a request after it has answered it
    wait_until(
        lambda: origin_requests(work, after=mark)[f"/hls/{fresh}?{fresh_query}"] >= 2,
        timeout=3,
        what="both refusals passed to the origin",
    )
    assert query  # the link had signatures before it was revoked
