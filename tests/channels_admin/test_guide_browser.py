"""The programme guide through the real server: fetched (gzip) from a real XMLTV server on
loopback at start and on its schedule, given by the API, shown on the TV page's overlay and on
the admin page in Chromium; a guide that fails keeps the last good one and the admin says why."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import requests

from loopback_fakes.xmltv_origin import Show, XmltvOrigin, xmltv_document
from tests.channels_admin.staffed_server import STAFF_PASSWORD, staffed_server
from tests.conftest import SCREENSHOTS

HOUR = timedelta(hours=1)
DASH = "\N{EN DASH}"  # between a programme's start and stop, as the pages write it
REFRESH_SEC = 2
OVERLAY_SEC = 2  # the overlay's fade: time enough to see it shown after a key or a click


def wait_until(condition, timeout: float = 20, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not so within {timeout} s")


def document(base: datetime, *, morning: str = "Morning Show") -> bytes:
    """demo.1 by its tvg-id; demo.2 by its title, as a display name of another ID."""
    return xmltv_document(
        [
            ("demo.1", ["Pattern One"], "http://logo.example/one.png"),
            ("pattern-two", ["TEST PATTERN 2"], "http://logo.example/two.png"),
        ],
        [
            Show("demo.1", base, base + 3 * HOUR, morning, "Pilot"),
            Show("demo.1", base + 3 * HOUR, base + 4 * HOUR, "Noon Show"),
            Show("pattern-two", base, base + 4 * HOUR, "Cartoons"),
        ],
    )


@pytest.fixture(scope="module")
def origin():
    server = XmltvOrigin()
    # on now for the next hour at least, whatever the minute
    server.base = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - HOUR
    server.documents["/guide.xml"] = document(server.base)
    yield server
    server.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, origin):
    with staffed_server(
        tmp_path_factory.mktemp("guide-var"),
        CHANNELS_GUIDE_URL=origin.url("/guide.xml.gz"),
        CHANNELS_GUIDE_REFRESH_SEC=str(REFRESH_SEC),
        CHANNELS_OVERLAY_SEC=str(OVERLAY_SEC),
    ) as base_url:
        yield base_url


@pytest.fixture
def utc_page(browser, request):
    """A page whose clock reads UTC, so that the times it shows are known here."""
    context = browser.new_context(viewport={"width": 1200, "height": 900}, timezone_id="UTC")
    page = context.new_page()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.shot = lambda name: page.screenshot(path=SCREENSHOTS / f"{request.node.name}-{name}.png")
    yield page
    context.close()


def status(server: str) -> dict:
    return requests.get(f"{server}/api/admin/status", timeout=5).json()


def select(server: str, channel_id: str) -> None:
    answer = requests.post(
        f"{server}/api/admin/channel", json={"channel_id": channel_id}, timeout=10
    )
    assert answer.status_code == 200, answer.text


def hhmm(at: datetime) -> str:
    return at.strftime("%H:%M")


def test_the_server_fetches_the_guide_at_start_and_the_api_gives_now_and_next(server, origin):
    guide = wait_until(lambda: status(server)["guide"]["version"] and status(server)["guide"])

    assert (guide["channels"], guide["programmes"], guide["last_error"]) == (2, 3, "")
    assert guide["sources"] == [origin.url("/guide.xml.gz")]
    channels = requests.get(f"{server}/api/admin/channels", timeout=5).json()
    by_id = {channel["id"]: channel for channel in channels}
    base = origin.base
    assert by_id["demo.1"]["now"] | {"progress": None} == {
        "title": "Morning Show",
        "subtitle": "Pilot",
        "start": base.isoformat(),
        "stop": (base + 3 * HOUR).isoformat(),
        "progress": None,
    }
    elapsed = (datetime.now(UTC) - base) / (3 * HOUR)
    assert abs(by_id["demo.1"]["now"]["progress"] - elapsed) < 0.01
    assert by_id["demo.1"]["next"] == {
        "title": "Noon Show",
        "subtitle": "",
        "start": (base + 3 * HOUR).isoformat(),
        "stop": (base + 4 * HOUR).isoformat(),
    }
    assert by_id["demo.2"]["now"]["title"] == "Cartoons"  # by its title
    assert by_id["demo.2"]["next"] is None
    searched = requests.get(f"{server}/api/admin/channels?search=2", timeout=5).json()
    assert [(c["id"], c["now"]["title"]) for c in searched] == [("demo.2", "Cartoons")]


def test_the_tv_page_overlay_shows_at_a_change_fades_and_shows_on_request(server, origin, utc_page):
    wait_until(lambda: status(server)["guide"]["version"])
    page, base = utc_page, origin.base
    select(server, "demo.1")

    page.goto(f"{server}/tv/")
    page.wait_for_selector("#overlay.shown")
    page.wait_for_function("() => document.getElementById('overlay-now').textContent !== ''")
    page.shot("overlay")

    assert page.text_content("#overlay-channel") == "Test pattern 1"
    assert page.text_content("#overlay-now") == (
        f"{hhmm(base)}{DASH}{hhmm(base + 3 * HOUR)} Morning Show: Pilot"
    )
    assert page.text_content("#overlay-next") == f"Next {hhmm(base + 3 * HOUR)} Noon Show"
    # the playlist has no tvg-logo for it: the guide's icon
    assert page.get_attribute("#overlay-logo", "src") == "http://logo.example/one.png"
    assert page.get_attribute("#channel-logo", "src") == "http://logo.example/one.png"
    progress = page.evaluate("() => document.getElementById('overlay-progress').value")
    assert abs(progress - (datetime.now(UTC) - base) / (3 * HOUR)) < 0.01

    page.wait_for_selector("#overlay:not(.shown)", timeout=8000)  # faded after OVERLAY_SEC
    page.keyboard.press("i")
    assert page.get_attribute("#overlay", "class") == "tv-overlay shown"
    page.wait_for_selector("#overlay:not(.shown)", timeout=8000)
    page.click("#player", position={"x": 300, "y": 100})
    assert page.get_attribute("#overlay", "class") == "tv-overlay shown"
    page.wait_for_selector("#overlay:not(.shown)", timeout=8000)

    select(server, "demo.2")
    page.wait_for_selector("#overlay.shown")
    page.wait_for_function(
        "() => document.getElementById('overlay-channel').textContent === 'Test pattern 2'"
    )
    assert (
        page.text_content("#overlay-now") == f"{hhmm(base)}{DASH}{hhmm(base + 4 * HOUR)} Cartoons"
    )
    assert page.text_content("#overlay-next") == ""
    assert page.get_attribute("#overlay-logo", "src") == "http://logo.example/two.png"


def test_a_refresh_reaches_the_tv_page_and_the_admin_says_why_one_failed(server, origin, utc_page):
    wait_until(lambda: status(server)["guide"]["version"])
    page, base = utc_page, origin.base
    select(server, "demo.1")
    page.goto(f"{server}/tv/")
    page.wait_for_function("() => document.getElementById('overlay-now').textContent !== ''")
    version = status(server)["guide"]["version"]

    # given: a new guide at the origin, which the server fetches on its schedule
    origin.documents["/guide.xml"] = document(base, morning="Breakfast News")
    changed = time.monotonic()
    page.wait_for_function(
        "() => document.getElementById('overlay-now').textContent"
        ".endsWith('Breakfast News: Pilot')",
        timeout=15_000,
    )
    print(f"\nthe new guide on the TV page {time.monotonic() - changed:.1f} s after it changed")
    assert status(server)["guide"]["version"] > version

    # when: the guide no longer parses, then: the last good one stays, and the admin says why
    admin = page.context.new_page()
    admin.goto(f"{server}/admin/login/?next=/tv/admin/")
    admin.fill("#id_username", "admin")
    admin.fill("#id_password", STAFF_PASSWORD)
    admin.click("input[type=submit]")
    admin.wait_for_selector("#channels tr")
    admin.wait_for_function(
        "() => document.querySelector('#channels tr .guide-now')?.textContent.includes('Breakfast')"
    )
    first_row = admin.locator("#channels tr").first
    assert first_row.locator(".guide-now").text_content() == (
        f"{hhmm(base)}{DASH}{hhmm(base + 3 * HOUR)} Breakfast News: Pilot"
    )
    assert first_row.locator(".guide-next").text_content() == (
        f"Next {hhmm(base + 3 * HOUR)} Noon Show"
    )
    bar = first_row.locator("progress").evaluate("bar => bar.value")
    assert abs(bar - (datetime.now(UTC) - base) / (3 * HOUR)) < 0.01
    assert admin.text_content("#guide-state").startswith("Guide: 3 programmes of 2 channels, ")

    origin.documents["/guide.xml"] = b"<tv><programme>"
    try:
        url = origin.url("/guide.xml.gz")
        admin.wait_for_function(
            "() => document.getElementById('guide-state').textContent.includes('failed')",
            timeout=15_000,
        )
        admin.shot = page.shot
        text = admin.text_content("#guide-state")
        assert text.endswith(
            f"failed: {url}: the guide is not well-formed XML: no element found: line 1, "
            "column 15 (the last good guide is kept)"
        )
        assert text.startswith("Guide: 3 programmes of 2 channels, refreshed ")
        assert admin.get_attribute("#guide-state", "class") == "message error"
        # the overlay still shows the last good guide
        assert page.text_content("#overlay-now").endswith("Breakfast News: Pilot")
        assert first_row.locator(".guide-now").text_content().endswith("Breakfast News: Pilot")
    finally:
        origin.documents["/guide.xml"] = document(base)
