"""The viewer and admin pages in a real browser against the real server and its demo channels;
and the admin page's schedule panel: an entry added is listed among the next switches, a one-off
entry a few seconds ahead switches the channel, which the page shows with the switch it made,
and one whose time has passed is refused with the reason; and private viewing: the admin page
makes the stream private and a link, the TV page plays through that link, and a revoke stops it
with a sentence; and a programme of the guide (served by a real XMLTV server on loopback)
played by the schedule: at its start the channel switches to it, at its end back to what
played before, and the admin page's pick (a channel, its programmes, "Play when it starts",
the entry among the next switches)."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import re

import pytest
import requests

from loopback_fakes.xmltv_origin import Show, XmltvOrigin, xmltv_document
from tests.channels_admin.staffed_server import STAFF_PASSWORD, staffed_server
from tests.channels_admin.stream_client import status, wait_until
from tests.channels_admin.test_schedule_server import finished

PLAYING = """() => {
    const video = document.getElementById("player");
    return video.readyState >= 2 && video.currentTime > 1;
}"""


HOUR = dt.timedelta(hours=1)
DASH = "\N{EN DASH}"  # between two times, as the page writes it
# demo.1 by its tvg-id; demo.2 by its title ("Test pattern 2"), a display name of another ID
CHANNELS = [("demo.1", ["Pattern One"], ""), ("pattern-two", ["TEST PATTERN 2"], "")]


@pytest.fixture(scope="module")
def guide_origin():
    """The XMLTV server of the server's guide: no programme until a test serves some."""
    server = XmltvOrigin()
    server.documents["/guide.xml"] = xmltv_document(CHANNELS, [])
    yield server
    server.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, guide_origin):
    # One viewer at most: the pages' own players stay within it, one at a time.
    with staffed_server(
        tmp_path_factory.mktemp("pages-var"),
        CHANNELS_MAX_VIEWERS="1",
        CHANNELS_GUIDE_URL=guide_origin.url("/guide.xml"),
    ) as base_url:
        yield base_url


def select(server: str, channel_id: str) -> None:
    answer = requests.post(
        f"{server}/api/admin/channel", json={"channel_id": channel_id}, timeout=10
    )
    assert answer.status_code == 200, answer.text


def test_viewer_plays_the_channel_and_follows_a_switch(server, page):
    select(server, "demo.1")

    page.goto(f"{server}/tv/")
    page.wait_for_function(PLAYING, timeout=20_000)
    page.shot("playing")

    # mpegts.js plays /ts through Media Source Extensions: the video's source is theirs
    assert page.evaluate("() => document.getElementById('player').src").startswith("blob:")
    assert page.text_content("#channel-name") == "Test pattern 1"
    assert page.text_content("#state") == "live"
    assert page.text_content("#channel-details") == "#1 · Demo"

    select(server, "demo.2")
    page.wait_for_function(
        "() => document.getElementById('channel-name').textContent === 'Test pattern 2'"
    )
    page.wait_for_function(PLAYING, timeout=20_000)  # rebuilt for the new stream
    page.shot("switched")

    assert page.text_content("#state") == "live"


def admin_login(server: str, page) -> None:
    page.goto(f"{server}/admin/login/?next=/tv/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", STAFF_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#channels tr")


@contextlib.contextmanager
def watching(server: str):
    """A /ts viewer outside the browser, reading until the block ends."""
    with requests.get(f"{server}/ts", stream=True, timeout=10) as response:
        assert response.status_code == 200, response.text
        # Held while the block runs: a dropped reader would close the connection.
        reads = response.iter_content(188 * 10)
        assert len(next(reads)) == 188 * 10
        yield


def test_a_refused_viewer_is_told_and_the_admin_sees_the_refusal(server, page):
    select(server, "demo.1")
    refused_before = requests.get(f"{server}/api/admin/status", timeout=5).json()["viewers_refused"]

    with watching(server):
        page.goto(f"{server}/tv/")
        page.wait_for_function(
            "() => document.getElementById('message').textContent"
            " === 'This server carries all the viewers it can; trying again in 10 s…'"
        )
        page.shot("refused")

        status = requests.get(f"{server}/api/admin/status", timeout=5).json()
        assert (status["viewers"], status["refusing_viewers"]) == (1, True)
        assert status["viewers_refused"] == refused_before + 1

        admin_login(server, page)
        assert page.text_content("#status-details") == (
            f"playlist version 1 · 1 viewer · refusing new viewers · {refused_before + 1} refused"
        )


def test_admin_page_needs_a_staff_login(server, page):
    page.goto(f"{server}/tv/admin/")

    assert "/admin/login/" in page.url


def test_admin_page_searches_and_selects_a_channel(server, page):
    admin_login(server, page)

    page.fill("#search", "PATTERN 2")
    page.wait_for_function("() => document.querySelectorAll('#channels tr').length === 1")
    page.click("#channels tr button")
    page.wait_for_function(
        "() => document.getElementById('channel-name').textContent === 'Test pattern 2'"
    )
    page.wait_for_function("() => document.getElementById('state').textContent === 'live'")
    page.shot("selected")

    status = requests.get(f"{server}/api/admin/status", timeout=5).json()
    assert status["channel_name"] == "Test pattern 2"
    assert page.text_content("#count") == "1 channel"

    page.click("#reload")
    page.wait_for_function(
        "() => document.getElementById('message').textContent === 'Playlist reloaded: 2 channels.'"
    )
    assert requests.get(f"{server}/api/admin/status", timeout=5).json()["playlist_version"] == 2


def test_the_admin_makes_a_link_the_viewer_plays_it_and_a_revoke_stops_it(server, browser):
    # (before the tests of the HLS output, whose clients count as viewers a while: the one
    # viewer this server carries is this test's)
    select(server, "demo.1")
    admin = browser.new_context().new_page()
    viewer = browser.new_context().new_page()
    admin_login(server, admin)

    # the admin page: private, then a link capped at two viewers
    admin.check("#private")
    said = "(word) => document.getElementById('message').textContent.includes(word)"
    admin.wait_for_function(said, arg="private")
    admin.fill("#link-name", "Aunt Mary")
    admin.fill("#link-cap", "2")
    admin.click("#link-make")
    admin.wait_for_selector("#link-made:not([hidden])")
    url = admin.input_value("#link-url")
    # a page without the link is refused, with the reason and no player
    viewer.goto(f"{server}/tv/")
    refused = viewer.text_content("#message")
    has_player = viewer.evaluate("() => Boolean(document.getElementById('player'))")
    # the link plays, and the admin page counts its viewer
    viewer.goto(url)
    viewer.wait_for_function(PLAYING, timeout=20_000)
    admin.wait_for_function(
        """() => [...document.querySelectorAll('#links tr')].some((row) =>
            row.cells[0].textContent === 'Aunt Mary' && row.cells[3].textContent === '1')""",
        timeout=10_000,
    )
    admin.screenshot(path="test-output/screenshots/viewer-links-admin.png")
    row = admin.locator("#links tr", has_text="Aunt Mary")
    cells = row.locator("td").all_text_contents()
    # the revoke: the viewer's stream ends, and the page says why without retrying
    row.locator("button", has_text="Revoke").click()
    viewer.wait_for_function(
        "() => document.getElementById('message').textContent.includes('revoked')",
        timeout=10_000,
    )
    viewer.screenshot(path="test-output/screenshots/viewer-links-revoked.png")
    admin.wait_for_function(
        """() => [...document.querySelectorAll('#links tr')].some((row) =>
            row.cells[0].textContent === 'Aunt Mary' && row.cells[4].textContent === 'revoked')""",
        timeout=10_000,
    )

    assert url.startswith(f"{server}/tv/?t=")
    assert refused == "This stream is private: open it with the link you were given."
    assert has_player is False
    assert cells[:5] == ["Aunt Mary", "never", "2", "1", "active"]
    assert viewer.text_content("#message") == (
        "This link no longer opens the stream: it was revoked or has expired."
    )
    assert viewer.text_content("#state") == "off air"
    admin.uncheck("#private")
    admin.wait_for_function("() => document.getElementById('message').textContent.includes('open')")


def test_a_browser_without_media_source_extensions_gets_the_hls_output(server, page):
    # Safari on iOS has no MSE and plays HLS itself; Chromium cannot play HLS, but the page's
    # choice shows in the video's source
    page.add_init_script("delete window.MediaSource; delete window.ManagedMediaSource;")
    select(server, "demo.1")

    page.goto(f"{server}/tv/")
    # (Chromium then fails to play it, and the page tries again a second later)
    chosen = page.wait_for_function(
        "() => { const src = document.getElementById('player').src;"
        " return src.includes('/hls/') && src; }",
        timeout=10_000,
    )

    assert chosen.json_value() == f"{server}/hls/live.m3u8"
    assert page.evaluate("() => typeof window.MediaSource") == "undefined"
    assert page.evaluate("() => !mpegts.getFeatureList().mseLivePlayback") is True


def next_days(count: int) -> list[str]:
    """The next ``count`` Mondays and Fridays with 20:00 UTC still to come, as the page
    writes them ("Fri 27 Nov,")."""
    now, found = dt.datetime.now(dt.UTC), []
    day = now.date()
    while len(found) < count:
        at = dt.datetime.combine(day, dt.time(20), tzinfo=dt.UTC)
        if day.weekday() in (0, 4) and at > now:
            found.append(f"{at:%a} {at.day} {at:%b},")
        day += dt.timedelta(days=1)
    return found


def test_an_entry_added_on_the_admin_page_is_listed_and_switches(server, page):
    # (on this module's server: the entries it makes are removed at its end, so that none
    # switches the channel under the tests after it)
    select(server, "demo.2")  # what plays before the entry's switch
    try:
        schedule_entered_and_switched(server, page)
    finally:
        for entry in requests.get(f"{server}/api/admin/schedule", timeout=10).json()["entries"]:
            requests.delete(f"{server}/api/admin/schedule/{entry['id']}", timeout=10)


def schedule_entered_and_switched(server: str, page) -> None:
    admin_login(server, page)
    page.wait_for_function(
        "() => document.getElementById('channel-name').textContent === 'Test pattern 2'"
    )

    # a weekly entry: listed with its next switches
    page.fill("#entry-name", "Film night")
    page.fill("#entry-channel", "demo.2")
    page.fill("#entry-time", "20:00:00")
    page.check("#entry-days input[value='0']")
    page.check("#entry-days input[value='4']")
    page.click("#entry-save")
    page.wait_for_selector("#schedule-entries tr")

    assert page.text_content("#schedule-message") == "Entry added."
    row = page.locator("#schedule-entries tr").first
    assert row.locator("td").nth(0).text_content() == "Film night"
    assert row.locator("td").nth(1).text_content() == "Test pattern 2"
    assert row.locator("td").nth(2).text_content() == "Mon, Fri 20:00:00"
    upcoming = page.locator("#schedule-upcoming li").all_text_contents()
    assert upcoming == [f"{day} 20:00:00 · Test pattern 2 (Film night)" for day in next_days(10)]

    # a one-off entry whose time has passed: refused, the page saying why
    page.fill("#entry-name", "Soon")
    page.fill("#entry-channel", "demo.1")
    page.select_option("#entry-kind", "once")
    page.fill("#entry-at", "2020-01-02T20:00:00")
    page.click("#entry-save")
    page.wait_for_selector("#schedule-message.error")
    refusal = page.text_content("#schedule-message")
    assert re.fullmatch(
        r"at: 2020-01-02 20:00:00 has passed \(now [\d-]+ [\d:]+, UTC\): a one-off entry must "
        r"be in the future",
        refusal,
    ), refusal
    assert page.locator("#schedule-entries tr").count() == 1

    # a one-off entry four seconds ahead (the schedule's zone is UTC here): it switches
    at = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=4)).strftime("%Y-%m-%dT%H:%M:%S")
    page.fill("#entry-at", at)
    page.click("#entry-save")
    page.wait_for_function("() => document.querySelectorAll('#schedule-entries tr').length === 2")
    page.wait_for_function(
        "() => document.getElementById('channel-name').textContent === 'Test pattern 1'",
        timeout=15_000,
    )
    runs = "() => document.getElementById('schedule-runs').textContent"
    page.wait_for_function(f"{runs}.includes('Soon start: switched')", timeout=10_000)
    page.shot("scheduled")

    assert page.locator("#schedule-runs li").count() == 1


def guide_serve(server: str, guide_origin: XmltvOrigin, shows: list[Show]) -> None:
    """Serve ``shows`` and have the server refresh its guide now."""
    guide_origin.documents["/guide.xml"] = xmltv_document(CHANNELS, shows)
    refreshed = requests.post(f"{server}/api/admin/guide/refresh", timeout=20)
    assert refreshed.status_code == 200, refreshed.text


def whole_seconds_from_now(seconds: int) -> dt.datetime:
    """A time ``seconds`` ahead, on a whole second (the guide's times have no fractions)."""
    now = dt.datetime.now(dt.UTC)
    return dt.datetime.fromtimestamp(math.ceil(now.timestamp()) + seconds, dt.UTC)


def test_a_programme_plays_from_its_start_and_goes_back_at_its_end(server, guide_origin):
    # (after the schedule panel's test, which counts the switches made on this server)
    select(server, "demo.1")
    wait_until(lambda: not status(server)["transitioning"], what="Test pattern 1 playing")
    start = whole_seconds_from_now(3)
    guide_serve(
        server, guide_origin, [Show("pattern-two", start, start + dt.timedelta(seconds=3), "Brief")]
    )
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
        (start + dt.timedelta(seconds=3)).isoformat(),
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


def shown(at: dt.datetime) -> str:
    """An instant as the schedule panel writes it in its zone, UTC here ("Fri 27 Nov, 20:15:00")."""
    return f"{at:%a} {at.day} {at:%b}, {at:%H:%M:%S}"


def test_a_programme_is_picked_on_the_admin_page(server, guide_origin, page):
    hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    shows = [
        Show("demo.1", hour, hour + 2 * HOUR, "Morning Show", "Pilot"),  # on now
        Show("demo.1", hour + 2 * HOUR, hour + 3 * HOUR, "Late Show"),
    ]
    guide_serve(server, guide_origin, shows)
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


LAST_SEGMENT = re.compile(r"^seg-[0-9a-f]{8}-(\d+)\.ts\?", re.MULTILINE)
HLS_JS_PAGE = """<!doctype html>
<video id="player" muted autoplay playsinline></video>
<script src="/static/vendor/hls.js/dist/hls.min.js"></script>
<script>
  const video = document.getElementById("player");
  const hls = new Hls();
  window.playing = { sn: 0, start: 0 };  // the segment playing: its media sequence, its start
  hls.on(Hls.Events.FRAG_CHANGED, (event, data) => {
    window.playing = { sn: data.frag.sn, start: data.frag.start };
  });
  hls.loadSource("/hls/live.m3u8");
  hls.attachMedia(video);
  video.play().catch(() => {});
</script>
"""


def test_hls_js_plays_the_hls_output_across_a_switch(server, page):
    # (the HLS tests come last: their clients count as viewers for a few segments after)
    select(server, "demo.1")
    page.route(
        f"{server}/hls-test",
        lambda route: route.fulfill(body=HLS_JS_PAGE, content_type="text/html"),
    )

    page.goto(f"{server}/hls-test")
    page.wait_for_function(
        "() => document.getElementById('player').currentTime > 1", timeout=20_000
    )
    select(server, "demo.2")  # answered once the old channel's last segment is published
    playlist = requests.get(f"{server}/hls/live.m3u8", timeout=5).text
    # the last segment's media sequence (its URI's signature may hold a "-" too)
    switched = int(LAST_SEGMENT.findall(playlist)[-1])
    page.wait_for_function(
        f"() => window.playing.sn > {switched}"
        " && document.getElementById('player').currentTime > window.playing.start + 1",
        timeout=25_000,
    )
    page.shot("hls-switched")

    assert "#EXT-X-DISCONTINUITY\n" in requests.get(f"{server}/hls/live.m3u8", timeout=5).text
