"""Private viewer links against the real server (daphne) playing its own demo channel: tokens
on /ts, the HLS playlist, the TV page and the status feed; signed segments; a link's cap; a
revoke or an expiry cutting its viewers off; and the attacks: guessed tokens, a flood without a
link, a crowd on a capped link, a revoked link reconnecting in a loop."""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import secrets
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import requests
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.channels_admin.stream_client import select, status, wait_until
from tests.conftest import free_port, running_server

SIGNED = re.compile(r"^(seg-[0-9a-f]{8}-\d+\.ts)\?l=(\d+)&e=(\d+)&s=([A-Za-z0-9_-]{22})$", re.M)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    var_dir = tmp_path_factory.mktemp("links-var")
    with running_server(var_dir, port=port, SERVER_URL=f"http://127.0.0.1:{port}") as base_url:
        select(base_url, "demo.1")
        yield base_url


@pytest.fixture
def private(server):
    """The stream private for the test, open again after it."""
    set_private(server, True)
    yield
    set_private(server, False)


def set_private(server: str, private: bool) -> None:
    answer = requests.post(f"{server}/api/admin/private", json={"private": private}, timeout=10)
    assert answer.json() == {"private": private}


def make_link(server: str, name: str = "friends", **fields) -> dict:
    answer = requests.post(f"{server}/api/admin/links", json={"name": name, **fields}, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def revoke(server: str, link: dict) -> requests.Response:
    return requests.post(f"{server}/api/admin/links/{link['id']}/revoke", timeout=10)


def viewers_of(server: str, link: dict) -> int:
    return next(row["viewers"] for row in status(server)["links"] if row["id"] == link["id"])


@contextlib.contextmanager
def ts_viewer(server: str, token: str | None):
    """A /ts viewer that read its first bytes; yields the iterator of its next chunks (a
    generator dropped would close the connection)."""
    params = {"t": token} if token is not None else {}
    with requests.get(f"{server}/ts", params=params, stream=True, timeout=(5, 10)) as answer:
        assert answer.status_code == 200, answer.text
        chunks = answer.iter_content(188)
        assert next(chunks)[0] == 0x47
        yield chunks


def ended_within(chunks, seconds: float) -> float:
    """How long until the stream of ``chunks`` ends (it must within ``seconds``)."""
    began = time.monotonic()
    with contextlib.suppress(requests.ConnectionError):
        for _ in chunks:
            assert time.monotonic() - began < seconds, "the stream went on"
    return time.monotonic() - began


def refused(server: str, path: str, token: str | None) -> tuple[int, str]:
    params = {"t": token} if token is not None else {}
    answer = requests.get(f"{server}{path}", params=params, timeout=10)
    return answer.status_code, answer.text


def test_the_stream_is_open_by_default(server):
    with ts_viewer(server, None):
        assert status(server)["private"] is False
    assert requests.get(f"{server}/tv/", timeout=10).status_code == 200


def test_private_refuses_requests_without_a_valid_link(server, private):
    link = make_link(server)

    no_link = "this stream is private: open it with the link you were given"
    assert refused(server, "/ts", None) == (401, no_link)
    assert refused(server, "/ts", "") == (401, no_link)
    assert refused(server, "/hls/live.m3u8", None) == (401, no_link)
    assert refused(server, "/ts", "x" * 43) == (403, "this link is not valid")
    assert refused(server, "/ts", "x" * 10_000) == (403, "this link is not valid")
    assert refused(server, "/ts", link["token"][:-1]) == (403, "this link is not valid")
    page = requests.get(f"{server}/tv/", timeout=10)
    assert page.status_code == 401
    assert "This stream is private: open it with the link you were given." in page.text
    assert "viewer.js" not in page.text
    with pytest.raises(InvalidStatus) as feed:
        connect(server.replace("http", "ws") + "/ws/tv/status", origin=server, open_timeout=10)
    assert feed.value.response.status_code == 403
    # and with the link, all of them
    assert link["url"] == f"{server}/tv/?t={link['token']}"
    assert requests.get(link["url"], timeout=10).status_code == 200
    with connect(
        server.replace("http", "ws") + f"/ws/tv/status?t={link['token']}", origin=server
    ) as ws:
        assert '"channel_name"' in ws.recv(timeout=10)
    with ts_viewer(server, link["token"]):
        wait_until(lambda: viewers_of(server, link) == 1, what="the link's viewer counted")


def test_a_link_is_stored_hashed_and_listed_with_its_bounds(server):
    expires = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    link = make_link(server, "  Aunt Mary  ", expires_at=expires.isoformat(), max_viewers=3)

    listed = requests.get(f"{server}/api/admin/links", timeout=10).json()
    row = next(row for row in listed["links"] if row["id"] == link["id"])
    assert len(link["token"]) == 43
    assert {k: link[k] for k in ("name", "max_viewers", "expires_at")} == {
        "name": "Aunt Mary",
        "max_viewers": 3,
        "expires_at": expires.isoformat(),
    }
    assert {k: row[k] for k in ("name", "max_viewers", "revoked_at", "active", "viewers")} == {
        "name": "Aunt Mary",
        "max_viewers": 3,
        "revoked_at": None,
        "active": True,
        "viewers": 0,
    }
    assert link["token"] not in str(listed)


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ({"name": ""}, "name must be 1 to 100 characters"),
        ({"name": "x" * 101}, "name must be 1 to 100 characters"),
        ({"name": 5}, "name must be a string"),
        ({"name": "a", "max_viewers": 0}, "max_viewers must be 1 to 1,000,000, or null"),
        ({"name": "a", "max_viewers": True}, "max_viewers must be a whole number, or null"),
        (
            {"name": "a", "expires_at": "2000-01-01T00:00:00+00:00"},
            "expires_at must be in the future, within ten years",
        ),
        (
            {"name": "a", "expires_at": "tomorrow"},
            "expires_at must be an ISO 8601 time with a time zone, or null",
        ),
        ([1], "invalid json: an object is expected"),
    ],
)
def test_a_link_out_of_bounds_is_refused(server, body, text):
    before = requests.get(f"{server}/api/admin/links", timeout=10).json()["links"]

    answer = requests.post(f"{server}/api/admin/links", json=body, timeout=10)

    assert (answer.status_code, answer.text) == (400, text)
    assert requests.get(f"{server}/api/admin/links", timeout=10).json()["links"] == before


def test_revoking_an_unknown_link_is_404(server):
    answer = requests.post(f"{server}/api/admin/links/999999/revoke", timeout=10)
    assert (answer.status_code, answer.text) == (404, "link not found")


def test_the_links_api_is_the_admins_only(server):
    forwarded = {"X-Forwarded-For": "203.0.113.9"}  # as through a proxy: not this machine
    made = requests.post(
        f"{server}/api/admin/links", json={"name": "x"}, headers=forwarded, timeout=10
    )
    made_private = requests.post(
        f"{server}/api/admin/private", json={"private": True}, headers=forwarded, timeout=10
    )
    assert (made.status_code, made_private.status_code) == (401, 401)
    assert status(server)["private"] is False


def test_revoking_a_link_cuts_its_viewers_off_and_its_reconnections(server, private):
    link, other = make_link(server, "revoked"), make_link(server, "kept")

    with ts_viewer(server, link["token"]) as cut, ts_viewer(server, other["token"]) as kept:
        wait_until(lambda: viewers_of(server, link) == 1, what="the viewer counted")
        assert revoke(server, link).status_code == 200
        took = ended_within(cut, seconds=5)
        assert next(kept)  # the other link's viewer plays on
    # a revoked link reconnecting in a loop: refused every time, never counted
    answers = {refused(server, "/ts", link["token"]) for _ in range(30)}
    assert answers == {(403, "this link was revoked")}
    assert refused(server, "/hls/live.m3u8", link["token"]) == (403, "this link was revoked")
    assert viewers_of(server, link) == 0
    assert took < 2


def test_an_expired_link_cuts_its_viewers_off(server, private):
    expires = datetime.now(UTC) + timedelta(seconds=3)
    link = make_link(server, "brief", expires_at=expires.isoformat())

    with ts_viewer(server, link["token"]) as answer:
        ended_within(answer, seconds=10)
    late = (datetime.now(UTC) - expires).total_seconds()

    assert refused(server, "/ts", link["token"]) == (403, "this link has expired")
    assert -0.2 < late < 2


def test_going_private_cuts_off_the_viewers_without_a_link(server):
    link = make_link(server, "kept")
    try:
        with ts_viewer(server, None) as open_viewer, ts_viewer(server, link["token"]) as linked:
            set_private(server, True)
            took = ended_within(open_viewer, seconds=5)
            assert next(linked)
    finally:
        set_private(server, False)
    assert took < 2


CROWD = 12


def test_a_capped_link_shared_by_a_crowd_admits_its_cap(server, private):
    link = make_link(server, "capped", max_viewers=3)
    start = threading.Barrier(CROWD)

    def viewer(_: int) -> tuple[int, str]:
        start.wait()
        with requests.get(
            f"{server}/ts", params={"t": link["token"]}, stream=True, timeout=(10, 10)
        ) as answer:
            if answer.status_code == 200:
                chunks = answer.iter_content(188)
                next(chunks)
                admitted.wait()  # hold the place until every viewer was answered
                return 200, ""
            return answer.status_code, answer.text

    admitted = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(CROWD) as pool:
        futures = [pool.submit(viewer, n) for n in range(CROWD)]
        wait_until(lambda: sum(f.done() for f in futures) == CROWD - 3, timeout=20, what="refusals")
        counted = viewers_of(server, link)
        admitted.set()
        answers = [f.result() for f in futures]

    full = (429, "this link is watched by its most viewers (3): try again later")
    assert sorted(answers) == [(200, "")] * 3 + [full] * (CROWD - 3)
    assert counted == 3


GUESSES = 300


def test_guessed_tokens_are_refused_at_a_bounded_cost(server, private):
    link = make_link(server, "real")

    def guess(_: int) -> tuple[int, str, float]:
        began = time.monotonic()
        with requests.Session() as session:
            answer = session.get(
                f"{server}/ts", params={"t": secrets.token_urlsafe(32)}, timeout=10
            )
        return answer.status_code, answer.text, time.monotonic() - began

    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        guesses = list(pool.map(guess, range(GUESSES)))
    seconds = time.monotonic() - began

    assert {(code, text) for code, text, _ in guesses} == {(403, "this link is not valid")}
    assert seconds < 30  # 300 hashes and index lookups on a loaded 2-core machine
    with ts_viewer(server, link["token"]):  # the real link still plays
        pass


def test_a_flood_without_a_link_is_refused_and_never_counted(server, private):
    def request(n: int) -> tuple[int, str]:
        path = "/ts" if n % 2 else "/hls/live.m3u8"
        with requests.Session() as session:
            answer = session.get(f"{server}{path}", timeout=10)
        return answer.status_code, answer.text

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = set(pool.map(request, range(GUESSES)))

    assert answers == {(401, "this stream is private: open it with the link you were given")}
    assert status(server)["viewers"] == 0


def test_hls_segments_carry_a_signature_for_the_link(server, private):
    link = make_link(server, "hls")

    def signed_playlist() -> str:
        answer = requests.get(f"{server}/hls/live.m3u8", params={"t": link["token"]}, timeout=10)
        return answer.text if answer.status_code == 200 else ""

    wait_until(lambda: len(SIGNED.findall(signed_playlist())) >= 2, timeout=20, what="segments")
    asked = time.time()
    text = signed_playlist()
    answered = time.time()
    lines = SIGNED.findall(text)
    name, link_id, expires, _signature = lines[-1]
    uri = next(line for line in text.splitlines() if line.startswith(name))
    good = requests.get(f"{server}/hls/{uri}", timeout=10)
    bare = requests.get(f"{server}/hls/{name}", timeout=10)
    other_segment = requests.get(f"{server}/hls/{lines[-2][0]}?{uri.split('?')[1]}", timeout=10)
    tampered = requests.get(
        f"{server}/hls/{uri.replace(f'l={link_id}', f'l={int(link_id) + 1}')}", timeout=10
    )
    expired = requests.get(
        f"{server}/hls/{uri.replace(f'e={expires}', f'e={int(time.time()) - 1}')}", timeout=10
    )
    superscript = requests.get(  # a digit to str.isdigit(), not to int()
        f"{server}/hls/{uri.replace(f'l={link_id}', 'l=%C2%B2')}", timeout=10
    )

    refusal = (403, "this segment's link is not valid or has expired: reload the playlist")
    assert int(link_id) == link["id"]
    # six target durations (2 s each) from when the playlist was made, rounded up to 2 s
    assert asked + 12 <= int(expires) <= answered + 12 + 2
    assert (good.status_code, good.content[:1]) == (200, b"\x47")
    assert good.headers["Cache-Control"] == "public, max-age=3600, immutable"
    for answer in (bare, other_segment, tampered, expired, superscript):
        assert (answer.status_code, answer.text) == refusal
        assert answer.headers["Cache-Control"] == "no-store"
    assert revoke(server, link).status_code == 200
    assert refused(server, "/hls/live.m3u8", link["token"]) == (403, "this link was revoked")
    # its signatures stop at once at this process (a cache in front keeps what it has)
    wait_until(
        lambda: requests.get(f"{server}/hls/{uri}", timeout=10).status_code == 403,
        timeout=3,
        what="the revoked link's signature refused",
    )


def feed_closed_within(ws, seconds: float) -> tuple[int, float]:
    """The close code of the status feed ``ws`` (it must close within ``seconds``), and when."""
    began = time.monotonic()
    try:
        while (left := seconds - (time.monotonic() - began)) > 0:
            ws.recv(timeout=left)
    except ConnectionClosed as closed:
        return closed.rcvd.code, time.monotonic() - began
    raise AssertionError(f"the feed stayed open for {seconds} s")


@contextlib.contextmanager
def status_feed(server: str, token: str | None):
    """The TV page's status feed, open (through the link of ``token``), its first status read."""
    query = f"?t={token}" if token is not None else ""
    with connect(server.replace("http", "ws") + f"/ws/tv/status{query}", origin=server) as ws:
        assert '"channel_name"' in ws.recv(timeout=10)
        yield ws


def test_revoking_a_link_closes_its_status_feeds(server, private):
    link, other = make_link(server, "revoked feed"), make_link(server, "kept feed")

    with status_feed(server, link["token"]) as cut, status_feed(server, other["token"]) as kept:
        assert revoke(server, link).status_code == 200
        code, took = feed_closed_within(cut, seconds=3)
        kept.send('{"type": "refresh"}')
        assert '"channel_name"' in kept.recv(timeout=10)  # the other link's feed goes on

    assert code == 4403
    assert took < 3


def test_going_private_closes_the_status_feeds_without_a_link(server):
    # (a feed opened while the stream is open came without a link, token or not, as /ts does)
    try:
        with status_feed(server, None) as open_feed:
            set_private(server, True)
            code, took = feed_closed_within(open_feed, seconds=3)
    finally:
        set_private(server, False)
    assert (code, took < 3) == (4403, True)


def playlist_as(server: str, token: str, address: str) -> requests.Response:
    """The playlist as the client at ``address`` asks for it (through a proxy the server
    trusts, as loopback is by default)."""
    return requests.get(
        f"{server}/hls/live.m3u8",
        params={"t": token},
        headers={"X-Forwarded-For": address},
        timeout=10,
    )


def test_a_capped_links_hls_clients_count_against_its_cap(server, private):
    link = make_link(server, "hls capped", max_viewers=1)
    wait_until(lambda: playlist_as(server, link["token"], "203.0.113.1").ok, what="a playlist")

    # A's reloads are served, however many; B and a /ts viewer of the link are past the cap
    reloads = [playlist_as(server, link["token"], "203.0.113.1") for _ in range(3)]
    last_reload = time.monotonic()
    b = playlist_as(server, link["token"], "203.0.113.2")
    ts = requests.get(f"{server}/ts", params={"t": link["token"]}, timeout=10)
    counted = next(row for row in status(server)["links"] if row["id"] == link["id"])

    full = (429, "this link is watched by its most viewers (1): try again later")
    assert [answer.status_code for answer in reloads] == [200] * 3
    # each reload reaches the origin, which counts it: no cache in front may keep it
    assert reloads[0].headers["Cache-Control"] == "private, no-store"
    assert (b.status_code, b.text) == full
    assert (b.headers["Retry-After"], b.headers["Cache-Control"]) == ("10", "no-store")
    assert (ts.status_code, ts.text) == full
    assert (counted["viewers"], counted["hls_viewers"]) == (1, 1)
    # A stops reloading: once the window (three target durations, 6 s) has passed, B is served
    wait_until(
        lambda: playlist_as(server, link["token"], "203.0.113.2").status_code == 200,
        timeout=12,
        what="B served",
    )
    waited = time.monotonic() - last_reload
    assert 5.5 < waited < 8
    assert playlist_as(server, link["token"], "203.0.113.1").status_code == 429


def test_an_uncapped_links_playlist_stays_cacheable_and_its_clients_are_counted(server, private):
    link = make_link(server, "hls open")
    wait_until(lambda: playlist_as(server, link["token"], "203.0.113.7").ok, what="a playlist")
    answers = [playlist_as(server, link["token"], f"203.0.113.{n}") for n in range(8, 12)]

    counted = next(row for row in status(server)["links"] if row["id"] == link["id"])
    assert {answer.status_code for answer in answers} == {200}
    assert answers[0].headers["Cache-Control"] == "public, max-age=1"
    assert (counted["viewers"], counted["hls_viewers"]) == (5, 5)
