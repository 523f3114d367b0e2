"""The schedule's admin API through Django's async test client: entries created, listed with
their next switches, changed and deleted; refused with a clear reason; bounded; protected."""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import AsyncClient
from django.utils import timezone

from channels_admin.models import ScheduleEntry
from channels_admin.services.playlists import playlist_reload
from channels_admin.services.schedule_runner import schedule_look
from tests.channels_admin.conftest import m3u
from tests.channels_admin.test_admin_api import RemoteClient

pytestmark = pytest.mark.django_db(transaction=True)

SCHEDULE = "/api/admin/schedule"


@pytest.fixture(autouse=True)
async def connections_closed_after():
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def channels(playlist_file, settings):
    settings.CHANNELS_SCHEDULE_TZ = "Europe/Berlin"
    playlist_file(
        m3u(
            ("news", "News", "http://127.0.0.1:9/1.ts"), ("film", "Film", "http://127.0.0.1:9/2.ts")
        )
    )
    playlist_reload()


@pytest.fixture
def client():
    return AsyncClient()


async def create(client, **values):
    return await client.post(SCHEDULE, values, content_type="application/json")


async def test_a_weekly_entry_is_created_and_listed_with_its_next_switches(client, channels):
    response = await create(
        client,
        name="Evening news",
        channel_id="news",
        time_of_day="20:00",
        until_time="20:15",
        weekdays=[0, 1, 2, 3, 4],
        then_return=True,
    )

    assert response.status_code == 200, response.content
    entry = response.json()
    assert entry == {
        "id": entry["id"],
        "name": "Evening news",
        "channel_id": "news",
        "channel_name": "News",
        "enabled": True,
        "kind": "weekly",
        "at": None,
        "until": None,
        "time_of_day": "20:00:00",
        "until_time": "20:15:00",
        "weekdays": [0, 1, 2, 3, 4],
        "days": "Mon-Fri",
        "then_return": True,
        "programme_title": "",
        "missed": "take_up",
    }
    listed = (await client.get(SCHEDULE)).json()
    assert listed["time_zone"] == "Europe/Berlin"
    assert [e["id"] for e in listed["entries"]] == [entry["id"]]
    now = dt.datetime.fromisoformat(listed["now"])
    first = dt.datetime.fromisoformat(listed["entries"][0]["next"][0]["start"])
    assert first > now
    local = first.astimezone(ZoneInfo("Europe/Berlin"))
    assert (local.hour, local.minute, local.weekday() < 5) == (20, 0, True)
    # each start, then its return, in order
    actions = [item["action"] for item in listed["upcoming"]]
    assert actions == ["start", "return"] * 5
    assert {item["channel_name"] for item in listed["upcoming"]} == {"News"}
    assert listed["runs"] == []


async def test_a_one_off_programme_entry_with_an_end_and_return(client, channels):
    response = await create(
        client,
        kind="once",
        channel_id="film",
        at="2099-01-02T20:15:00+01:00",
        until="2099-01-02T22:00",  # no offset: the schedule's zone
        then_return=True,
        programme_title="The Film",
    )

    assert response.status_code == 200, response.content
    entry = response.json()
    assert (entry["at"], entry["until"]) == (
        "2099-01-02T19:15:00+00:00",
        "2099-01-02T21:00:00+00:00",
    )
    assert (entry["programme_title"], entry["then_return"]) == ("The Film", True)
    listed = (await client.get(SCHEDULE)).json()
    assert listed["entries"][0]["next"] == [
        {"start": "2099-01-02T19:15:00+00:00", "end": "2099-01-02T21:00:00+00:00"}
    ]
    assert [(item["at"], item["action"], item["name"]) for item in listed["upcoming"]] == [
        ("2099-01-02T19:15:00+00:00", "start", "The Film"),
        ("2099-01-02T21:00:00+00:00", "return", "The Film"),
    ]


@pytest.mark.parametrize(
    ("values", "text"),
    [
        (
            {"channel_id": "nope", "time_of_day": "20:00", "weekdays": [0]},
            "channel_id: No channel of the playlist has this ID.",
        ),
        (
            {
                "channel_id": "news",
                "kind": "once",
                "at": "2099-01-02T20:00",
                "until": "2099-01-02T19:00",
            },
            "until: The end must come after the start.",
        ),
        (
            {"channel_id": "news", "time_of_day": "20:00", "weekdays": [7]},
            "weekdays: Select a valid choice. 7 is not one of the available choices.",
        ),
        (
            {"channel_id": "news", "time_of_day": "20:00", "weekdays": [1, 1]},
            "weekdays: Give the days as a list of numbers from 0 (Monday) to 6 (Sunday), each "
            "once, at least one.",
        ),
        (
            {"channel_id": "news", "time_of_day": "20:00", "weekdays": []},
            "weekdays: Give the days as a list of numbers from 0 (Monday) to 6 (Sunday), each "
            "once, at least one.",
        ),
        (
            {"channel_id": "news", "time_of_day": "25:00", "weekdays": [0]},
            "time_of_day: Enter a valid time.",
        ),
        ({"channel_id": "news", "kind": "once"}, "at: A one-off entry needs its time."),
        (
            {"channel_id": "news", "time_of_day": "20:00", "weekdays": [0], "then_return": True},
            "then_return: Going back needs an end.",
        ),
        (
            {"channel_id": "news", "kind": "daily"},
            "kind: Select a valid choice. daily is not one of the available choices.",
        ),
        (
            {"channel_id": "news", "name": "x" * 201, "time_of_day": "20:00", "weekdays": [0]},
            "name: Ensure this value has at most 200 characters (it has 201).",
        ),
        ({"channel_id": "news", "enabled": "no"}, "enabled: must be true or false"),
        ({"channel_id": 5}, "channel_id: must be text"),
        ({"channel_id": "news", "colour": "red"}, "unknown field: colour"),
    ],
)
async def test_invalid_entries_are_refused_with_the_reason(client, channels, values, text):
    response = await create(client, **values)

    assert (response.status_code, response.content.decode()) == (400, text)
    assert await ScheduleEntry.objects.acount() == 0


async def test_an_entry_is_changed_and_deleted(client, channels):
    entry = (await create(client, channel_id="news", time_of_day="06:00", weekdays=[5])).json()
    path = f"{SCHEDULE}/{entry['id']}"

    changed = await client.patch(path, {"channel_id": "film", "enabled": False}, "application/json")
    refused = await client.patch(path, {"weekdays": [9]}, "application/json")
    deleted = await client.delete(path)
    again = await client.delete(path)

    assert changed.status_code == 200
    assert (changed.json()["channel_name"], changed.json()["enabled"]) == ("Film", False)
    assert changed.json()["time_of_day"] == "06:00:00"  # kept
    assert refused.status_code == 400
    assert deleted.json() == {"status": "ok"}
    assert (again.status_code, again.content) == (404, b"schedule entry not found")
    assert await ScheduleEntry.objects.acount() == 0


async def test_an_entry_that_changes_only_counts_from_then(client, channels):
    # an entry made at 10:05 for 10:00 does not fire at once, nor does one moved to the past
    now = timezone.now()
    past = (now - dt.timedelta(minutes=5)).astimezone(dt.UTC)
    await create(
        client, channel_id="news", time_of_day=past.strftime("%H:%M:%S"), weekdays=list(range(7))
    )

    looked = await sync_to_async(schedule_look)(now=timezone.now())

    assert looked.due == []
    assert looked.next_at is not None
    assert looked.next_at > now


async def test_the_schedule_is_bounded(client, channels, settings):
    settings.CHANNELS_SCHEDULE_MAX_ENTRIES = 2
    for _ in range(2):
        assert (
            await create(client, channel_id="news", time_of_day="06:00", weekdays=[0])
        ).status_code == 200

    refused = await create(client, channel_id="news", time_of_day="07:00", weekdays=[0])
    huge = await client.post(SCHEDULE, b"[" * 100_000, content_type="application/json")

    assert (refused.status_code, refused.content) == (
        409,
        b"the schedule is full: 2 entries at most",
    )
    assert (huge.status_code, huge.content) == (400, b"invalid json")
    assert await ScheduleEntry.objects.acount() == 2


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", SCHEDULE),
        ("post", SCHEDULE),
        ("patch", f"{SCHEDULE}/1"),
        ("delete", f"{SCHEDULE}/1"),
    ],
)
async def test_remote_requests_need_credentials(channels, method, path):
    response = await getattr(RemoteClient(), method)(path)

    assert (response.status_code, response.content) == (401, b"authentication required")


async def test_each_endpoint_takes_its_methods_only(client, channels):
    listed = await client.put(SCHEDULE)
    entry = await client.get(f"{SCHEDULE}/1")

    assert (listed.status_code, listed["Allow"]) == (405, "GET, POST")
    assert (entry.status_code, entry["Allow"]) == (405, "PATCH, DELETE")


PASSED = re.compile(
    r"at: (?P<at>[\d-]+ [\d:]+) has passed \(now (?P<now>[\d-]+ [\d:]+), Europe/Berlin\): "
    r"a one-off entry must be in the future"
)


def berlin_text(at: dt.datetime) -> str:
    return at.astimezone(ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d %H:%M:%S")


async def test_a_one_off_entry_whose_time_has_passed_is_refused_naming_it_and_now(client, channels):
    # given a time a minute ago, written in UTC
    before = timezone.now().replace(microsecond=0)
    past = before - dt.timedelta(minutes=1)

    response = await create(client, kind="once", channel_id="news", at=past.isoformat())

    # then it is refused, with the time and now in the schedule's zone (Berlin), and not kept
    after = timezone.now()
    text = response.content.decode()
    assert response.status_code == 400
    match = PASSED.fullmatch(text)
    assert match is not None, text
    assert match["at"] == berlin_text(past)
    now = dt.datetime.strptime(match["now"], "%Y-%m-%d %H:%M:%S").replace(
        tzinfo=ZoneInfo("Europe/Berlin")
    )
    assert before <= now <= after
    assert await ScheduleEntry.objects.acount() == 0


async def test_a_one_off_entry_moved_into_the_past_is_refused_and_one_that_passed_may_be_renamed(
    client, channels
):
    soon = timezone.now() + dt.timedelta(hours=1)
    entry = (await create(client, kind="once", channel_id="news", at=soon.isoformat())).json()
    path = f"{SCHEDULE}/{entry['id']}"
    past = timezone.now().replace(microsecond=0) - dt.timedelta(hours=2)

    moved = await client.patch(path, {"at": past.isoformat()}, "application/json")
    # an entry whose time passed since it was made (as if an hour went by) keeps its record
    await ScheduleEntry.objects.filter(pk=entry["id"]).aupdate(at=past)
    renamed = await client.patch(path, {"name": "Done"}, "application/json")
    weekly = await client.patch(
        path,
        {"kind": "weekly", "time_of_day": berlin_text(past)[11:], "weekdays": [0]},
        "application/json",
    )

    assert moved.status_code == 400
    assert PASSED.fullmatch(moved.content.decode())["at"] == berlin_text(past)
    assert (renamed.status_code, renamed.json()["name"]) == (200, "Done")
    assert (weekly.status_code, weekly.json()["kind"]) == (200, "weekly")  # any time of day
