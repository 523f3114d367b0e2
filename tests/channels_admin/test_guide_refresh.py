"""Refreshing the guide from a real XMLTV server on loopback, matching it to the playlist, and
the now/next the API gives; a guide that fails keeps the last good one."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from channels_admin.errors import GuideRefreshError
from channels_admin.models import GuideChannel, GuideState, Playlist, Programme
from channels_admin.selectors import channels_search, guide_now_next, guide_state
from channels_admin.services import guide as guide_service
from channels_admin.services.guide import guide_refresh, guide_refresh_due
from channels_admin.services.playlists import playlist_reload
from loopback_fakes.hung_server import HungServer
from loopback_fakes.xmltv_origin import Show, XmltvOrigin, xmltv_document

pytestmark = pytest.mark.django_db

AT = datetime(2026, 11, 27, 18, 15, tzinfo=UTC)
PLUS_ONE = timedelta(hours=1)


def anchor(at: datetime) -> datetime:
    """The "hour" the guide is written around: a quarter of an hour before ``at`` (whole
    seconds, as XMLTV writes them), so that what is on now does not depend on the clock's
    minute when the test runs."""
    return (at - timedelta(minutes=15)).replace(microsecond=0)


def shows(at: datetime) -> list[Show]:
    hour = anchor(at)
    return [
        # written in +01:00, as a European guide is
        Show("news.uk", hour - 9 * PLUS_ONE, hour - 8 * PLUS_ONE, "Long gone"),  # pruned
        Show("news.uk", hour, hour + PLUS_ONE, "Evening News", "Part 2"),
        Show("news.uk", hour + PLUS_ONE, hour + 2 * PLUS_ONE, "Late News"),
        Show("sport.fr", hour - PLUS_ONE, hour + PLUS_ONE / 2, "Match"),
        Show("sport.fr", hour + PLUS_ONE / 2, hour + 3 * PLUS_ONE, "Highlights"),
        Show("music", hour + 2 * PLUS_ONE, hour + 3 * PLUS_ONE, "Concert"),
    ]


def guide(at: datetime) -> bytes:
    offset = timedelta(hours=1)
    return xmltv_document(
        [
            ("news.uk", ["News One", "N1"], "http://logo.example/news.png"),
            ("sport.fr", ["Sport Deux"], "http://logo.example/sport.png"),
            ("music", ["Music Box"], ""),
        ],
        [
            Show(
                s.channel,
                s.start.astimezone(_zone(offset)),
                s.stop.astimezone(_zone(offset)),
                s.title,
                s.subtitle,
            )
            for s in shows(at)
        ],
    )


def _zone(offset: timedelta):
    from datetime import timezone

    return timezone(offset)


@pytest.fixture
def origin():
    server = XmltvOrigin()
    yield server
    server.close()


@pytest.fixture
def guided(origin, settings, playlist_file):
    """A playlist whose url-tvg is the origin's gzip guide; its channels match the guide by
    tvg-id (News), by tvg-name (Sport), by title (Music), or not at all (Other)."""
    settings.CHANNELS_DEMO = False
    settings.CHANNELS_GUIDE_URLS = []
    origin.at = datetime.now(UTC)
    origin.documents["/guide.xml"] = guide(origin.at)
    playlist_file(
        f'#EXTM3U url-tvg="{origin.url("/guide.xml.gz")}"\n'
        '#EXTINF:-1 tvg-id="news.uk" tvg-logo="http://logo.example/own.png",News\n'
        "http://tv.example/news.ts\n"
        '#EXTINF:-1 tvg-id="sport.unknown" tvg-name="SPORT deux",Sport\n'
        "http://tv.example/sport.ts\n"
        "#EXTINF:-1,music box\n"
        "http://tv.example/music.ts\n"
        '#EXTINF:-1 tvg-id="other",Other\n'
        "http://tv.example/other.ts\n"
    )
    playlist_reload()
    return origin


def now_next_at(at: datetime) -> dict:
    return guide_now_next(channels=list(Playlist.objects.get().channels.all()), at=at)


def test_a_refresh_from_the_playlists_gzip_guide_matches_by_tvg_id_then_by_name(guided):
    result = guide_refresh()

    assert (result.channels, result.programmes, result.left_out) == (3, 5, 0)  # one ended
    assert guided.requests == {"/guide.xml.gz": 1}
    hour = anchor(guided.at)
    at = hour + timedelta(minutes=15)
    iso = lambda at: at.isoformat()  # noqa: E731
    assert now_next_at(at) == {
        "news.uk": {
            "icon": "http://logo.example/news.png",
            "now": {
                "title": "Evening News",
                "subtitle": "Part 2",
                "start": iso(hour),
                "stop": iso(hour + PLUS_ONE),
                "progress": 0.25,
            },
            "next": {
                "title": "Late News",
                "subtitle": "",
                "start": iso(hour + PLUS_ONE),
                "stop": iso(hour + 2 * PLUS_ONE),
            },
        },
        "sport.unknown": {
            "icon": "http://logo.example/sport.png",
            "now": {
                "title": "Match",
                "subtitle": "",
                "start": iso(hour - PLUS_ONE),
                "stop": iso(hour + PLUS_ONE / 2),
                "progress": 0.833,  # 75 of its 90 minutes
            },
            "next": {
                "title": "Highlights",
                "subtitle": "",
                "start": iso(hour + PLUS_ONE / 2),
                "stop": iso(hour + 3 * PLUS_ONE),
            },
        },
        # nothing on now; the next one later
        Playlist.objects.get().channels.get(name="music box").channel_id: {
            "icon": "",
            "now": None,
            "next": {
                "title": "Concert",
                "subtitle": "",
                "start": iso(hour + 2 * PLUS_ONE),
                "stop": iso(hour + 3 * PLUS_ONE),
            },
        },
    }


def test_the_channel_list_carries_now_and_next(guided):
    guide_refresh()

    listed = {channel["name"]: (channel["now"], channel["next"]) for channel in channels_search()}

    assert listed["News"][0]["title"] == "Evening News"
    assert listed["News"][1]["title"] == "Late News"
    assert 0 <= listed["News"][0]["progress"] <= 1
    assert listed["Other"] == (None, None)
    assert [c["name"] for c in channels_search(search="spo")] == ["Sport"]
    assert channels_search(search="spo")[0]["now"]["title"] == "Match"


def test_a_guide_that_fails_keeps_the_last_good_one_and_says_why(guided):
    guide_refresh()
    before = list(Programme.objects.order_by("id").values_list("channel", "title", "version"))

    guided.documents["/guide.xml"] = b"<tv><programme>broken"
    with pytest.raises(GuideRefreshError) as raised:
        guide_refresh()

    url = guided.url("/guide.xml.gz")
    reason = f"{url}: the guide is not well-formed XML: no element found: line 1, column 21"
    assert raised.value.text == f"failed to refresh the guide: {reason}"
    assert (
        list(Programme.objects.order_by("id").values_list("channel", "title", "version")) == before
    )
    state = guide_state()
    assert (state["version"], state["programmes"], state["last_error"]) == (1, 5, reason)
    assert state["last_error_at"] == state["attempted_at"]

    guided.status = 404
    with pytest.raises(
        GuideRefreshError, match=rf"^download of {re.escape(url)} answered HTTP 404$"
    ):
        guide_refresh()
    assert Programme.objects.count() == 5
    assert GuideChannel.objects.filter(version=1).count() == 3
    assert GuideState.load().last_error == f"download of {url} answered HTTP 404"

    guided.status = 200
    guided.documents["/guide.xml"] = guide(guided.at)
    result = guide_refresh()

    # the new version shown, the old rows and those of the failed tries gone
    assert result.version == 4
    assert set(Programme.objects.values_list("version", flat=True)) == {4}
    assert (guide_state()["last_error"], guide_state()["last_error_at"]) == ("", None)


def test_a_hand_set_url_comes_first_and_owns_its_channels(guided, settings):
    other = XmltvOrigin()
    try:
        hour = anchor(guided.at)
        other.documents["/epg.xml"] = xmltv_document(
            [("news.uk", ["News One"], "http://logo.example/hand.png")],
            [Show("news.uk", hour, hour + PLUS_ONE, "Hand News")],
        )
        settings.CHANNELS_GUIDE_URLS = [other.url("/epg.xml")]

        result = guide_refresh()

        assert (result.channels, result.programmes) == (3, 4)
        assert other.requests == {"/epg.xml": 1}
        assert guided.requests == {"/guide.xml.gz": 1}
        titles = Programme.objects.filter(channel="news.uk").values_list("title", flat=True)
        assert list(titles) == ["Hand News"]
        assert guide_state()["sources"] == [other.url("/epg.xml"), guided.url("/guide.xml.gz")]
    finally:
        other.close()


def test_the_bounds_leave_out_what_is_past_them(guided, settings):
    settings.CHANNELS_GUIDE_MAX_PROGRAMMES = 2
    settings.CHANNELS_GUIDE_MAX_CHANNELS = 2

    result = guide_refresh()

    # music is the third channel (left out with its programme); of the other four
    # programmes the first two are kept
    assert (result.channels, result.programmes, result.left_out) == (2, 2, 4)
    assert guide_state()["left_out"] == 4


def test_a_download_past_the_size_cap_is_refused(guided, settings):
    settings.CHANNELS_GUIDE_MAX_BYTES = 100

    with pytest.raises(GuideRefreshError) as raised:
        guide_refresh()

    url = guided.url("/guide.xml.gz")
    assert raised.value.message == f"download of {url}: larger than 100 bytes"

    assert Programme.objects.count() == 0


def test_a_guide_on_an_address_the_server_may_not_fetch_is_refused(guided, settings):
    # given the default: the server's own machine (loopback here) is not fetched
    settings.CHANNELS_UPSTREAM_ALLOW = ()

    with pytest.raises(GuideRefreshError) as raised:
        guide_refresh()

    url = guided.url("/guide.xml.gz")
    assert raised.value.message == (
        f"download of {url} refused: its address is not one the server may fetch "
        "(CHANNELS_UPSTREAM_DENY)"
    )
    assert guided.requests == {}
    assert Programme.objects.count() == 0


def test_no_guide_url_is_a_failure_that_says_so(settings, playlist_file):
    settings.CHANNELS_GUIDE_URLS = []
    settings.CHANNELS_DEMO = False
    playlist_file("#EXTM3U\n#EXTINF:-1,A\nhttp://tv.example/a.ts\n")
    playlist_reload()

    with pytest.raises(GuideRefreshError):
        guide_refresh()

    assert GuideState.load().last_error == (
        "no guide URL: set CHANNELS_GUIDE_URL, or a playlist with url-tvg"
    )


def test_a_redis_that_never_answers_fails_the_refresh_in_bounded_time_and_blocks_none_after(
    guided, settings, monkeypatch
):
    # given the processes' refresh lock in a Redis that takes the connection and never answers
    monkeypatch.setattr(guide_service, "REDIS_TIMEOUT_SEC", 0.5)
    with HungServer() as hung:
        settings.REDIS_URL = hung.url
        started = time.monotonic()

        # when the guide is refreshed
        with pytest.raises(redis.TimeoutError):
            guide_refresh()
        took = time.monotonic() - started

    # then it failed within the bound, as when Redis is down, having asked it
    assert 0.45 <= took <= 3
    assert hung.received.startswith(b"*2\r\n$5\r\nHELLO\r\n")
    # and the process's own lock was given back: the next refresh runs
    settings.REDIS_URL = ""
    assert guide_refresh().programmes == 5


def test_the_refresh_is_due_after_its_interval_and_sooner_after_a_failure(guided, settings):
    settings.CHANNELS_GUIDE_REFRESH_SEC = 3600
    assert guide_refresh_due() is True
    guide_refresh()
    assert guide_refresh_due() is False

    GuideState.objects.update(attempted_at=datetime.now(UTC) - timedelta(seconds=3601))
    assert guide_refresh_due() is True

    guided.status = 500
    with pytest.raises(GuideRefreshError):
        guide_refresh()
    assert guide_refresh_due() is False
    failed_at = datetime.now(UTC) - timedelta(seconds=301)
    GuideState.objects.update(attempted_at=failed_at, last_error_at=failed_at)
    assert guide_refresh_due() is True


def test_the_command_refreshes_and_fails_with_the_reason(guided):
    out = StringIO()
    call_command("guide_refresh", stdout=out)
    assert out.getvalue() == "guide refreshed: 3 channels, 5 programmes\n"

    guided.status = 503
    with pytest.raises(CommandError) as raised:
        call_command("guide_refresh")
    url = guided.url("/guide.xml.gz")
    assert str(raised.value) == (
        f"failed to refresh the guide: download of {url} answered HTTP 503"
    )
