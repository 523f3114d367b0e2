"""Picking a programme of the guide for the schedule, through Django's async test client and a
real XMLTV server on loopback: a channel's upcoming programmes (matched by tvg-id or by name),
an entry made from one (exact JSON), the refusals with their texts, the bounds, the access."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import AsyncClient

from channels_admin.models import Channel, ScheduleEntry
from channels_admin.selectors import guide_programmes
from channels_admin.services.guide import guide_refresh
from channels_admin.services.playlists import playlist_reload
from loopback_fakes.xmltv_origin import Show, XmltvOrigin, xmltv_document
from tests.channels_admin.test_admin_api import RemoteClient

pytestmark = pytest.mark.django_db(transaction=True)

PROGRAMMES = "/api/admin/guide/programmes"
FROM_PROGRAMME = "/api/admin/schedule/programme"
MIN = timedelta(minutes=1)
NOW = datetime.now(UTC).replace(microsecond=0)


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def news_shows(moved: timedelta = timedelta(0)) -> list[Show]:
    return [
        Show("news.uk", NOW - 120 * MIN, NOW - 60 * MIN, "Long gone"),
        Show("news.uk", NOW - 10 * MIN, NOW + 20 * MIN, "Evening News", "Part 2"),
        Show("news.uk", NOW + 20 * MIN + moved, NOW + 80 * MIN, "Late News"),
        Show("news.uk", NOW + 80 * MIN, NOW + 140 * MIN, "Night Film"),
    ]


def document(shows: list[Show]) -> bytes:
    return xmltv_document(
        [("news.uk", ["News One"], ""), ("sport.fr", ["Sport Deux"], "")],
        [*shows, Show("sport.fr", NOW + 5 * MIN, NOW + 95 * MIN, "Match", "Final")],
    )


@pytest.fixture(autouse=True)
async def connections_closed_after():
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def origin():
    server = XmltvOrigin()
    server.documents["/guide.xml"] = document(news_shows())
    yield server
    server.close()


@pytest.fixture
def guided(origin, settings, playlist_file):
    """News matches the guide by tvg-id, Sport by tvg-name, Other not at all."""
    settings.CHANNELS_DEMO = False
    settings.CHANNELS_GUIDE_URLS = [origin.url("/guide.xml")]
    settings.CHANNELS_SCHEDULE_TZ = "UTC"
    playlist_file(
        "#EXTM3U\n"
        '#EXTINF:-1 tvg-id="news.uk",News\nhttp://127.0.0.1:9/news.ts\n'
        '#EXTINF:-1 tvg-id="sport.unknown" tvg-name="SPORT deux",Sport\n'
        "http://127.0.0.1:9/sport.ts\n"
        '#EXTINF:-1 tvg-id="other",Other\nhttp://127.0.0.1:9/other.ts\n'
    )
    playlist_reload()
    guide_refresh()
    return origin


@pytest.fixture
def client():
    return AsyncClient()


def programme(start, stop, title, subtitle="", *, on_now=False) -> dict:
    return {
        "start": iso(start),
        "stop": iso(stop),
        "title": title,
        "subtitle": subtitle,
        "on_now": on_now,
    }


def test_a_channels_programmes_by_tvg_id_and_by_name(guided):
    by_id = Channel.objects.get(channel_id="news.uk")
    by_name = Channel.objects.get(channel_id="sport.unknown")
    unguided = Channel.objects.get(channel_id="other")

    listed = [guide_programmes(channel=c, now=NOW) for c in (by_id, by_name, unguided)]

    assert listed == [
        {
            "channel_id": "news.uk",
            "guide_version": 1,
            "guide_channel": "news.uk",
            "programmes": [
                programme(NOW - 10 * MIN, NOW + 20 * MIN, "Evening News", "Part 2", on_now=True),
                programme(NOW + 20 * MIN, NOW + 80 * MIN, "Late News"),
                programme(NOW + 80 * MIN, NOW + 140 * MIN, "Night Film"),
            ],
        },
        {
            "channel_id": "sport.unknown",
            "guide_version": 1,
            "guide_channel": "sport.fr",
            "programmes": [programme(NOW + 5 * MIN, NOW + 95 * MIN, "Match", "Final")],
        },
        {"channel_id": "other", "guide_version": 1, "guide_channel": None, "programmes": []},
    ]
    assert guide_programmes(channel=by_id, now=NOW, limit=1)["programmes"] == [
        programme(NOW - 10 * MIN, NOW + 20 * MIN, "Evening News", "Part 2", on_now=True)
    ]


async def test_the_api_lists_a_channels_programmes(client, guided):
    response = await client.get(PROGRAMMES, {"channel_id": "sport.unknown"})

    assert response.status_code == 200
    assert response.json() == {
        "channel_id": "sport.unknown",
        "guide_version": 1,
        "guide_channel": "sport.fr",
        "programmes": [programme(NOW + 5 * MIN, NOW + 95 * MIN, "Match", "Final")],
    }


async def test_a_long_guide_lists_fifty_programmes(client, origin, guided):
    many = [Show("news.uk", NOW + i * MIN, NOW + (i + 1) * MIN, f"Short {i}") for i in range(1, 80)]
    origin.documents["/guide.xml"] = document(many)
    await sync_to_async(guide_refresh)()

    listed = (await client.get(PROGRAMMES, {"channel_id": "news.uk"})).json()["programmes"]

    assert [p["title"] for p in listed] == [f"Short {i}" for i in range(1, 51)]


async def test_an_entry_is_made_from_a_programme(client, guided):
    response = await client.post(
        FROM_PROGRAMME,
        {"channel_id": "news.uk", "start": iso(NOW + 20 * MIN), "guide_version": 1},
        content_type="application/json",
    )

    assert response.status_code == 200, response.content
    entry = response.json()
    assert entry == {
        "id": entry["id"],
        "name": "Late News",
        "channel_id": "news.uk",
        "channel_name": "News",
        "enabled": True,
        "kind": "once",
        "at": iso(NOW + 20 * MIN),
        "until": iso(NOW + 80 * MIN),
        "time_of_day": None,
        "until_time": None,
        "weekdays": [],
        "days": "",
        "then_return": True,
        "programme_title": "Late News",
        "missed": "take_up",
    }
    upcoming = (await client.get("/api/admin/schedule")).json()["upcoming"]
    assert [(u["at"], u["action"], u["name"]) for u in upcoming] == [
        (iso(NOW + 20 * MIN), "start", "Late News"),
        (iso(NOW + 80 * MIN), "return", "Late News"),
    ]


async def test_a_programme_kept_by_a_refresh_is_still_found(client, origin, guided):
    # the rows are written anew (new IDs, version 2); the programme is where it was
    listed = (await client.get(PROGRAMMES, {"channel_id": "news.uk"})).json()
    await sync_to_async(guide_refresh)()

    response = await client.post(
        FROM_PROGRAMME,
        {"channel_id": "news.uk", "start": listed["programmes"][2]["start"], "guide_version": 1},
        content_type="application/json",
    )

    assert response.status_code == 200, response.content
    assert (response.json()["name"], response.json()["until"]) == (
        "Night Film",
        iso(NOW + 140 * MIN),
    )


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ({"channel_id": "nope", "start": iso(NOW + 20 * MIN)}, 404, "channel not found"),
        (
            {"channel_id": "news.uk", "start": iso(NOW + 21 * MIN)},
            404,
            "the guide has no programme on this channel at that time",
        ),
        (
            {"channel_id": "other", "start": iso(NOW + 20 * MIN)},
            404,
            "the guide has no programme on this channel at that time",
        ),
        ({"channel_id": "news.uk", "start": iso(NOW - 120 * MIN)}, 409, "the programme has ended"),
        (
            {"channel_id": "news.uk", "start": iso(NOW - 10 * MIN)},
            409,
            "the programme has started: switch to the channel now instead",
        ),
        (
            {"channel_id": "news.uk", "start": "2099-01-01T20:00"},
            400,
            "start must be an ISO 8601 time with a time zone",
        ),
        (
            {"channel_id": "news.uk", "start": "2" * 10_000},
            400,
            "start must be an ISO 8601 time with a time zone",
        ),
        (
            {"channel_id": "x" * 301, "start": iso(NOW)},
            400,
            "channel_id must be text of 1 to 300 characters",
        ),
        (
            {"channel_id": "news.uk", "start": iso(NOW), "guide_version": "1"},
            400,
            "guide_version must be a whole number, or null",
        ),
    ],
)
async def test_a_programme_that_cannot_be_an_entry_is_refused(client, guided, body, status, text):
    response = await client.post(FROM_PROGRAMME, body, content_type="application/json")

    assert (response.status_code, response.content.decode()) == (status, text)
    assert await ScheduleEntry.objects.acount() == 0


async def test_a_programme_moved_by_a_refresh_since_it_was_picked_is_refused(
    client, origin, guided
):
    origin.documents["/guide.xml"] = document(news_shows(moved=5 * MIN))
    await sync_to_async(guide_refresh)()

    response = await client.post(
        FROM_PROGRAMME,
        {"channel_id": "news.uk", "start": iso(NOW + 20 * MIN), "guide_version": 1},
        content_type="application/json",
    )

    assert (response.status_code, response.content.decode()) == (
        404,
        "the guide was refreshed since and has no programme on this channel at that time",
    )
    assert await ScheduleEntry.objects.acount() == 0


async def test_a_programme_is_scheduled_once_and_within_the_schedules_bound(
    client, guided, settings
):
    settings.CHANNELS_SCHEDULE_MAX_ENTRIES = 1
    body = {"channel_id": "news.uk", "start": iso(NOW + 20 * MIN)}
    first = await client.post(FROM_PROGRAMME, body, content_type="application/json")

    again = await client.post(FROM_PROGRAMME, body, content_type="application/json")
    other = await client.post(
        FROM_PROGRAMME,
        {"channel_id": "news.uk", "start": iso(NOW + 80 * MIN)},
        content_type="application/json",
    )
    huge = await client.post(FROM_PROGRAMME, b"[" * 100_000, content_type="application/json")

    assert first.status_code == 200
    assert (again.status_code, again.content.decode()) == (
        409,
        "the programme is in the schedule already",
    )
    assert (other.status_code, other.content.decode()) == (
        409,
        "the schedule is full: 1 entries at most",
    )
    assert (huge.status_code, huge.content) == (400, b"invalid json")
    assert await ScheduleEntry.objects.acount() == 1


@pytest.mark.parametrize(
    ("query", "status", "text"),
    [
        ({}, 400, "channel_id must be 1 to 300 characters"),
        ({"channel_id": "x" * 301}, 400, "channel_id must be 1 to 300 characters"),
        ({"channel_id": "a\x00"}, 400, "channel_id must be 1 to 300 characters"),
        ({"channel_id": "nope"}, 404, "channel not found"),
    ],
)
async def test_a_bad_programmes_query_is_refused(client, guided, query, status, text):
    response = await client.get(PROGRAMMES, query)

    assert (response.status_code, response.content.decode()) == (status, text)


@pytest.mark.parametrize(("method", "path"), [("get", PROGRAMMES), ("post", FROM_PROGRAMME)])
async def test_remote_requests_need_credentials(guided, method, path):
    response = await getattr(RemoteClient(), method)(path)

    assert (response.status_code, response.content) == (401, b"authentication required")


async def test_each_endpoint_takes_its_methods_only(client, guided):
    listed = await client.post(PROGRAMMES)
    made = await client.get(FROM_PROGRAMME)

    assert (listed.status_code, listed["Allow"]) == (405, "GET")
    assert (made.status_code, made["Allow"]) == (405, "POST")
