"""The admin JSON API through Django's async test client (the views are async)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import connections
from django.test import AsyncClient

from channels_admin.models import Channel, Playlist, StreamState
from channels_admin.runtime import stream_runtime
from channels_admin.services.playlists import playlist_reload
from channels_admin.services.stream import stream_hub_shutdown
from loopback_fakes.ts_upstream import TsUpstream
from tests.channels_admin.conftest import m3u

pytestmark = pytest.mark.django_db(transaction=True)


class RemoteClient(AsyncClient):
    """A client on another machine: async test requests otherwise come from 127.0.0.1."""

    def _base_scope(self, **request):
        return {**super()._base_scope(**request), "client": ["203.0.113.9", 50000]}


@pytest.fixture
def remote():
    return RemoteClient()


ENDPOINTS = {
    "/api/config": "GET",
    "/api/admin/channels": "GET",
    "/api/admin/groups": "GET",
    "/api/admin/status": "GET",
    "/api/admin/channel": "POST",
    "/api/admin/playlist/reload": "POST",
}


@pytest.fixture(autouse=True)
async def connections_closed_after():
    """Close the database connection the requests' sync code opened in asgiref's thread: the
    test client, unlike a server, leaves it open after the request, and PostgreSQL will not
    drop the test database while a connection is open."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
async def hub_closed_after():
    yield
    await stream_hub_shutdown()


@pytest.fixture(scope="module")
def upstream():
    """One loopback upstream for the module (conftest's is the test's own): closing one takes
    its server's next poll, half a second, and these tests are many. Each starts it behaving."""
    server = TsUpstream()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def upstream_behaves(upstream):
    upstream.refuse = upstream.stall = upstream.garbage = upstream.close_at_once = False


@pytest.fixture
def channels(playlist_file, upstream):
    playlist_file(
        m3u(
            ("news.one", "Ärzte News", upstream.url("/1.ts")),
            ("sport.one", "Sport One", upstream.url("/2.ts")),
            ("news.two", "STRASSE TV", upstream.url("/3.ts")),
            ("", "Untagged", upstream.url("/4.ts")),
        )
    )
    playlist_reload()


@pytest.fixture
def client():
    return AsyncClient()


async def test_config_is_public(remote):
    response = await remote.get("/api/config")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"player": "mpegts"}


@pytest.mark.parametrize(("path", "method"), ENDPOINTS.items())
async def test_every_endpoint_accepts_only_its_method(client, path, method):
    wrong = "post" if method == "GET" else "get"

    response = await getattr(client, wrong)(path)

    assert response.status_code == 405
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content == b"method not allowed"
    assert response["Allow"] == method


async def test_channels_in_playlist_order(client, channels):
    response = await client.get("/api/admin/channels")

    assert response.status_code == 200
    body = response.json()
    assert [c["id"] for c in body] == [
        "news.one",
        "sport.one",
        "news.two",
        body[3]["id"],
        "demo.1",  # the demo channels follow the playlist (CHANNELS_DEMO)
        "demo.2",
    ]
    assert body[0] == {
        "id": "news.one",
        "name": "Ärzte News",
        "stream_url": body[0]["stream_url"],
        "group": "News",
        "logo": "http://logo/0.png",
        "now": None,  # no guide
        "next": None,
    }
    assert body[0]["stream_url"].endswith("/1.ts")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("search=ärzte", ["news.one"]),
        ("search=%C3%84RZTE", ["news.one"]),
        ("search=straße", ["news.two"]),  # casefold: ß matches SS
        ("search=NEWS.", ["news.one", "news.two"]),  # the ID matches too
        ("group=news", ["news.one", "news.two"]),
        ("group=NEWS&search=tv", ["news.two"]),
        ("group=New", []),  # the group must match whole
        ("group=demo", ["demo.1", "demo.2"]),
        ("search=nothing-like-this", []),
    ],
)
async def test_channel_search_and_group_filter(client, channels, query, expected):
    response = await client.get(f"/api/admin/channels?{query}")

    assert [c["id"] for c in response.json()] == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("search=%00", "search must not contain a NUL character"),
        ("search=news%00", "search must not contain a NUL character"),
        ("group=News%00", "group must not contain a NUL character"),
    ],
)
async def test_a_nul_in_a_filter_is_refused(client, channels, query, message):
    # SQLite matched every channel to a NUL, PostgreSQL refuses it as text: the same answer on both
    response = await client.get(f"/api/admin/channels?{query}")

    assert (response.status_code, response.content.decode()) == (400, message)
    assert response["Content-Type"] == "text/plain; charset=utf-8"


async def test_empty_filters_are_no_filters(client, channels):
    response = await client.get("/api/admin/channels?search=&group=")

    assert len(response.json()) == 6


async def test_groups_with_counts_sorted_by_name(client, channels):
    response = await client.get("/api/admin/groups")

    assert response.json() == [
        {"name": "Demo", "channels": 2},
        {"name": "News", "channels": 2},
        {"name": "Sport", "channels": 2},
    ]


async def test_select_channel_updates_status_and_points_the_hub(
    client, channels, upstream, hub_closed_after
):
    upstream.stall = True  # no first bytes yet: the switch is still in progress
    response = await client.post(
        "/api/admin/channel", {"channel_id": "sport.one"}, content_type="application/json"
    )

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "channel": "Sport One"}
    state = await StreamState.objects.aget(pk=StreamState.SINGLETON_PK)
    assert (state.channel_name, state.live, state.transitioning, state.upstream_down) == (
        "Sport One",
        True,
        True,
        False,
    )
    assert state.current_stream_url == upstream.url("/2.ts")
    assert state.sources == [{"url": upstream.url("/2.ts"), "headers": {}}]
    assert (state.source_index, state.failovers, state.switch_message) == (
        None,
        0,
        "Switching to Sport One…",
    )
    assert state.switch_started_at is not None
    assert (await stream_runtime().hub()).upstream.url == upstream.url("/2.ts")


@pytest.mark.parametrize(
    "body", [b"not json", b"[1, 2]", b'{"channel": "x"}', b'{"channel_id": 7}']
)
async def test_select_channel_with_a_bad_body_is_400(client, channels, body):
    response = await client.post("/api/admin/channel", body, content_type="application/json")

    assert response.status_code == 400
    assert response.content == b"invalid json"
    assert not await StreamState.objects.aexists()


async def test_select_unknown_channel_is_404(client, channels):
    response = await client.post(
        "/api/admin/channel", {"channel_id": "nope"}, content_type="application/json"
    )

    assert response.status_code == 404
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content == b"channel not found"
    assert not await StreamState.objects.aexists()


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        ("file:///etc/passwd", "file"),
        ("rtmp://example.org/live", "rtmp"),
        ("udp://239.0.0.1:1234", "udp"),
    ],
)
async def test_only_http_streams_can_be_selected(client, playlist_file, upstream, url, scheme):
    playlist_file(m3u(("odd.one", "Odd", url), ("fine.one", "Fine", upstream.url("/1.ts"))))
    await sync_to_async(playlist_reload)()

    response = await client.post(
        "/api/admin/channel", {"channel_id": "odd.one"}, content_type="application/json"
    )

    assert response.status_code == 400
    assert response.content.decode() == (
        f"channel 'odd.one' streams over {scheme}://; only http and https are relayed"
    )
    assert not await StreamState.objects.aexists()
    assert await Channel.objects.filter(channel_id="odd.one").aexists()  # kept in the playlist


async def test_status_before_any_selection(client, channels, hub_closed_after):
    response = await client.get("/api/admin/status")

    assert response.json() == {
        "channel_name": "",
        "live": False,
        "transitioning": False,
        "upstream_down": False,
        "upstream_detail": "",
        "upstream_info": "",
        "playlist_version": 1,
        "switch_started_at": None,
        "current_stream_url": "",
        "source": "",
        "sources": 0,
        "reconnecting": False,
        "stream_serial": 0,
        "stream_format": "",
        "failovers": 0,
        "last_failure": None,
        "switch_message": "",
        "switch_returned": False,
        "guide": {
            "version": 0,
            "refreshed_at": None,
            "attempted_at": None,
            "channels": 0,
            "programmes": 0,
            "left_out": 0,
            "sources": [],
            "last_error": "",
            "last_error_at": None,
        },
        "viewers": 0,
        "hls_viewers": 0,
        "refusing_viewers": False,
        "viewers_refused": 0,
        "viewers_shed": 0,
        "private": False,
        "links": [],
    }


async def test_reload_reports_the_channel_count(client, channels, playlist_file):
    playlist_file(m3u(("x", "X", "http://127.0.0.1:9/x.ts")))

    response = await client.post("/api/admin/playlist/reload")

    assert response.json() == {"status": "ok", "channels": 3}  # and the two demo channels
    assert (await Playlist.objects.aget(name="default")).version == 2


async def test_failed_reload_is_500_with_the_detail(client, channels, playlist_file):
    playlist_file("<!DOCTYPE html><html><body>login</body></html>")

    response = await client.post("/api/admin/playlist/reload")

    assert response.status_code == 500
    assert response.content.decode().startswith("failed to reload playlist: ")
    assert "HTML" in response.content.decode()
    assert await Channel.objects.acount() == 6


# Access


ADMIN_ENDPOINTS = {path: method for path, method in ENDPOINTS.items() if "/admin/" in path}


async def admin_request(client, path: str, **headers: str):
    """``path`` with its method; the writes with a body that would otherwise be taken."""
    if ENDPOINTS[path] == "GET":
        return await client.get(path, headers=headers)
    body = {"channel_id": "sport.one"} if path == "/api/admin/channel" else {}
    return await client.post(path, body, content_type="application/json", headers=headers)


async def nothing_changed() -> bool:
    """No channel selected and the playlist as loaded, though its file now lists another."""
    state = await StreamState.objects.filter(pk=StreamState.SINGLETON_PK).afirst()
    names = [name async for name in Channel.objects.values_list("name", flat=True)]
    return (state is None or not state.live) and len(names) == 6


@pytest.mark.parametrize("path", ADMIN_ENDPOINTS)
async def test_remote_requests_need_credentials(remote, channels, playlist_file, path):
    playlist_file(m3u(("only", "Only", "http://127.0.0.1:9/only.ts")))

    response = await admin_request(remote, path)

    assert (response.status_code, response.content) == (401, b"authentication required")
    assert await nothing_changed()


@pytest.mark.parametrize("path", ADMIN_ENDPOINTS)
async def test_a_wrong_token_is_refused_from_anywhere(
    client, channels, playlist_file, path, settings
):
    settings.CHANNELS_ADMIN_TOKEN = "s3cret"
    playlist_file(m3u(("only", "Only", "http://127.0.0.1:9/only.ts")))

    response = await admin_request(client, path, Authorization="Bearer nope")

    assert (response.status_code, response.content) == (401, b"invalid admin token")
    assert await nothing_changed()


@pytest.mark.parametrize(
    ("path", "header"),
    [
        ("/api/admin/channel", {"X-Forwarded-For": "203.0.113.9"}),
        ("/api/admin/channel", {"X-Real-IP": "203.0.113.9"}),
        ("/api/admin/channel", {"Forwarded": "for=203.0.113.9"}),
        # what nginx on this machine sends for a client that is on this machine too
        *((path, {"X-Forwarded-For": "127.0.0.1"}) for path in ADMIN_ENDPOINTS),
    ],
)
async def test_loopback_through_a_proxy_needs_credentials(
    client, channels, playlist_file, path, header
):
    playlist_file(m3u(("only", "Only", "http://127.0.0.1:9/only.ts")))

    response = await admin_request(client, path, **header)

    assert (response.status_code, response.content) == (401, b"authentication required")
    assert await nothing_changed()


async def test_loopback_is_refused_once_a_token_is_set(client, channels, settings):
    settings.CHANNELS_ADMIN_TOKEN = "s3cret"

    response = await client.get("/api/admin/channels")

    assert response.status_code == 401
    assert response.content == b"authentication required"


async def test_bearer_token_admits_any_address(remote, channels, settings):
    settings.CHANNELS_ADMIN_TOKEN = "s3cret"

    good = await remote.get("/api/admin/groups", headers={"Authorization": "Bearer s3cret"})
    bad = await remote.get("/api/admin/groups", headers={"Authorization": "Bearer nope"})

    assert good.status_code == 200
    assert (bad.status_code, bad.content) == (401, b"invalid admin token")


async def test_cross_site_request_from_a_local_browser_is_refused(client, channels):
    response = await client.post(
        "/api/admin/channel",
        {"channel_id": "sport.one"},
        content_type="application/json",
        headers={"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
    )

    assert response.status_code == 403
    assert response.content == b"cross-site request refused"
    assert not await StreamState.objects.aexists()


async def test_staff_session_is_admitted_with_its_csrf_token(channels, hub_closed_after):
    staff = await User.objects.acreate_user("admin", password="pw", is_staff=True)
    client = RemoteClient(enforce_csrf_checks=True)
    await client.aforce_login(staff)

    listed = await client.get("/api/admin/groups")
    without_token = await client.post(
        "/api/admin/channel", {"channel_id": "sport.one"}, content_type="application/json"
    )
    client.cookies["csrftoken"] = "a" * 32
    with_token = await client.post(
        "/api/admin/channel",
        {"channel_id": "sport.one"},
        content_type="application/json",
        headers={"X-CSRFToken": "a" * 32},
    )

    assert listed.status_code == 200
    assert (without_token.status_code, without_token.content) == (403, b"CSRF check failed")
    assert with_token.status_code == 200


async def test_logged_in_non_staff_user_is_forbidden(channels):
    user = await User.objects.acreate_user("viewer", password="pw")
    client = RemoteClient()
    await client.aforce_login(user)

    response = await client.get("/api/admin/channels")

    assert response.status_code == 403
    assert response.content == b"staff access required"
