"""A programme of the guide played by the schedule of the real server, the guide served by a
real XMLTV server on loopback: at the programme's start the channel switches to it, at its end
back to what played before; and the admin page's pick in Chromium (a channel, its programmes,
"Play when it starts", the entry among the next switches)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
import requests

from loopback_fakes.xmltv_origin import Show, XmltvOrigin, xmltv_document
from tests.channels_admin.staffed_server import staffed_server
from tests.channels_admin.stream_client import select, status, wait_until
from tests.channels_admin.test_pages_browser import admin_login
from tests.channels_admin.test_schedule_server import finished

HOUR = timedelta(hours=1)
DASH = "\N{EN DASH}"  # between two times, as the page writes it
# demo.1 by its tvg-id; demo.2 by its title ("Test pattern 2"), a display name of another ID
CHANNELS = [("demo.1", ["Pattern One"], ""), ("pattern-two", ["TEST PATTERN 2"], "")]


@pytest.fixture(scope="module")
def origin():
    server = XmltvOrigin()
    server.documents["/guide.xml"] = xmltv_document(CHANNELS, [])
    yield server
    server.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, origin):
    with staffed_server(
        tmp_path_factory.mktemp("programme-var"), CHANNELS_GUIDE_URL=origin.url("/guide.xml")
    ) as base_url:
        yield base_url


def guide_serve(server: str, origin: XmltvOrigin, shows: list[Show]) -> None:
    """Serve ``shows`` and have the server refresh its guide now."""
    origin.documents["/guide.xml"] = xmltv_document(CHANNELS, shows)
    refreshed = requests.post(f"{server}/api/admin/guide/refresh", timeout=20)
    assert refreshed.status_code == 200, refreshed.text


def whole_seconds_from_now(seconds: int) -> datetime:
    """A time ``seconds`` ahead, on a whole second (the guide's times have no fractions)."""
    now = datetime.now(UTC)
    return datetime.fromtimestamp(math.ceil(now.timestamp()) + seconds, UTC)


def test_a_programme_plays_from_its_start_and_goes_back_at_its_end(server, origin):
    select(server, "demo.1")
    wait_until(lambda: not status(server)["transitioning"], what="Test pattern 1 playing")
    start = whole_seconds_from_now(3)
    guide_serve(server, origin, [Show("pattern-two", start, start + timedelta(seconds=3), "Brief")])
    listed = requests.get(
        f"{server}/api/admin/guide/programmes", params={"channel_id": "demo.2"}, timeout=10
    ).json()
    (picked,) = listed["programmes"]

    made = requests.post(
        f"{server}/api/admin/schedule/programme",
        json={
            "channel_id": "demo.2",
            "start": picked["start"],
            "guide_version": listed["guide_version"],
        },
        timeout=10,
    )

    assert made.status_code == 200, made.text
    entry = made.json()
    assert (entry["at"], entry["until"], entry["programme_title"]) == (
        start.isoformat(),
        (start + timedelta(seconds=3)).isoformat(),
        "Brief",
    )
    wait_until(lambda: status(server)["channel_name"] == "Test pattern 2", what="the programme")
    wait_until(lambda: status(server)["channel_name"] == "Test pattern 1", what="the return")
    first, back = finished(server, entry, 2)
    assert [(r["action"], r["outcome"], r["channel_name"]) for r in (first, back)] == [
        ("start", "switched", "Test pattern 2"),
        ("return", "switched", "Test pattern 1"),
    ]
    assert 0 <= first["lateness"] < 1.0
    assert 0 <= back["lateness"] < 1.0


def shown(at: datetime) -> str:
    """An instant as the schedule panel writes it in its zone, UTC here ("Fri 27 Nov, 20:15:00")."""
    return f"{at:%a} {at.day} {at:%b}, {at:%H:%M:%S}"


def test_a_programme_is_picked_on_the_admin_page(server, origin, page):
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    shows = [
        Show("demo.1", hour, hour + 2 * HOUR, "Morning Show", "Pilot"),  # on now
        Show("demo.1", hour + 2 * HOUR, hour + 3 * HOUR, "Late Show"),
    ]
    guide_serve(server, origin, shows)
    admin_login(server, page)

    page.fill("#pick-channel", "demo.1")
    page.click("#pick-show")
    page.wait_for_selector("#pick-programmes li")
    items = page.locator("#pick-programmes li")
    assert items.all_text_contents() == [
        f"{shown(hour)} {DASH} {shown(hour + 2 * HOUR)} · Morning Show: Pilot (on now)",
        f"{shown(hour + 2 * HOUR)} {DASH} {shown(hour + 3 * HOUR)} · Late Show Play when it starts",
    ]
    items.nth(1).locator("button").click()
    late_show = page.locator("#schedule-entries tr", has_text="Late Show")
    late_show.wait_for()

    assert page.text_content("#pick-message") == "Scheduled: Late Show."
    rows = page.locator("#schedule-entries tr").count()
    row = late_show.locator("td")
    assert row.all_text_contents()[:3] == [
        "Late Show · then back",
        "Test pattern 1",
        f"{shown(hour + 2 * HOUR)} {DASH} {shown(hour + 3 * HOUR)}",
    ]
    assert page.locator("#schedule-upcoming li").all_text_contents() == [
        f"{shown(hour + 2 * HOUR)} · Test pattern 1 (Late Show)",
        f"{shown(hour + 3 * HOUR)} · back to what played before (Late Show ends)",
    ]
    page.shot("programme-picked")

    # the same again: refused, said so, nothing added
    items.nth(1).locator("button").click()
    page.wait_for_function(
        "() => document.getElementById('pick-message').textContent"
        " === 'the programme is in the schedule already'"
    )
    assert page.locator("#schedule-entries tr").count() == rows
