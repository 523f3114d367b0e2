"""The Django admin: the playlist's "Reload now" action, the read-only channel list, and the
schedule's entries."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User

from channels_admin.models import BackupSource, Channel, Playlist, ScheduleEntry, StillChannel
from channels_admin.services.playlists import playlist_reload
from tests.channels_admin.conftest import m3u

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def test_reload_now_action_reloads_and_reports(staff_client, playlist_file):
    playlist_file(m3u(("a", "Alpha", "http://tv.example/a.ts")))
    playlist_reload()
    playlist_file(m3u(("a", "Alpha", "http://tv.example/a.ts"), ("b", "Beta", "http://b/b.ts")))
    playlist = Playlist.objects.get()

    response = staff_client.post(
        "/admin/channels_admin/playlist/",
        {"action": "reload_now", "_selected_action": [playlist.pk]},
        follow=True,
    )

    # the two entries, and the two demo channels after them
    assert [str(m) for m in response.context["messages"]] == ["default: 4 channels, version 2"]
    assert Channel.objects.count() == 4


@pytest.mark.parametrize("who", ["anonymous", "not staff"])
def test_reload_now_needs_a_staff_login(client, playlist_file, who):
    playlist_file(m3u(("a", "Alpha", "http://tv.example/a.ts")))
    playlist_reload()
    playlist_file(m3u(("a", "Alpha", "http://tv.example/a.ts"), ("b", "Beta", "http://b/b.ts")))
    playlist = Playlist.objects.get()
    if who == "not staff":
        client.force_login(User.objects.create_user("viewer", password="pw"))

    response = client.post(
        "/admin/channels_admin/playlist/",
        {"action": "reload_now", "_selected_action": [playlist.pk]},
    )

    assert response.status_code == 302
    assert response["Location"] == ("/admin/login/?next=/admin/channels_admin/playlist/")
    assert (Playlist.objects.get().version, Channel.objects.count()) == (1, 3)


def test_reload_now_reports_a_failure_and_changes_nothing(staff_client, playlist_file):
    playlist_file(m3u(("a", "Alpha", "http://tv.example/a.ts")))
    playlist_reload()
    playlist_file("")
    playlist = Playlist.objects.get()

    response = staff_client.post(
        "/admin/channels_admin/playlist/",
        {"action": "reload_now", "_selected_action": [playlist.pk]},
        follow=True,
    )

    assert [str(m) for m in response.context["messages"]] == [
        "default: failed to reload playlist: the playlist is empty"
    ]
    assert Playlist.objects.get().version == 1


def test_playlist_page_lists_its_channels_read_only(staff_client, playlist_file):
    playlist_file(m3u(("a", "Alpha", "http://tv.example/a.ts"), ("b", "Beta", "http://b/b.ts")))
    playlist_reload()
    playlist = Playlist.objects.get()

    page = staff_client.get(f"/admin/channels_admin/playlist/{playlist.pk}/change/")
    channel = Channel.objects.get(channel_id="b")
    channel_page = staff_client.get(f"/admin/channels_admin/channel/{channel.pk}/change/")

    html = page.content.decode()
    assert page.status_code == 200
    assert "<td>0</td><td>a</td><td>Alpha</td><td>News</td>" in html
    assert "<td>1</td><td>b</td><td>Beta</td><td>Sport</td>" in html
    assert "All 4 channels" in html  # the demo channels follow the playlist's
    assert channel_page.status_code == 200
    assert 'name="name"' not in channel_page.content.decode()  # no editable field


def test_channel_list_searches_and_filters_by_group(staff_client, playlist_file):
    playlist_file(m3u(("a", "Alpha", "http://tv.example/a.ts"), ("b", "Beta", "http://b/b.ts")))
    playlist_reload()

    searched = staff_client.get("/admin/channels_admin/channel/?q=alp")
    filtered = staff_client.get("/admin/channels_admin/channel/?group=Sport")

    assert [c.channel_id for c in searched.context["cl"].result_list] == ["a"]
    assert [c.channel_id for c in filtered.context["cl"].result_list] == ["b"]


# Backups added by hand

SOURCES = """#EXTM3U
#EXTINF:-1 tvg-id="one.de" group-title="News",One
#EXTVLCOPT:http-user-agent=Box/1.0
http://a.example/one.ts
#EXTINF:-1 tvg-id="one.de" group-title="News",One HD
https://b.example/one-hd.m3u8
"""
ADD = "/admin/channels_admin/backupsource/add/"


@pytest.fixture
def sources(playlist_file, settings):
    settings.CHANNELS_DEMO = False
    playlist_file(SOURCES)
    playlist_reload()
    return Playlist.objects.get()


def form_of(response) -> dict:
    return response.context["adminform"].form.errors


def test_channel_page_lists_its_sources_in_order(staff_client, sources):
    BackupSource.objects.create(
        playlist=sources, channel_key="one.de", url="http://backup.example/one.ts"
    )
    backup = BackupSource.objects.get()
    channel = Channel.objects.get(name="One HD")

    page = staff_client.get(f"/admin/channels_admin/channel/{channel.pk}/change/")

    html = page.content.decode()
    assert page.status_code == 200
    assert (
        "<tr><td>1</td><td>primary</td><td>https://b.example/one-hd.m3u8</td><td>{}</td></tr>"
        "<tr><td>2</td><td>backup from the playlist</td><td>http://a.example/one.ts</td>"
        "<td>{&quot;User-Agent&quot;: &quot;Box/1.0&quot;}</td></tr>"
        f'<tr><td>3</td><td><a href="/admin/channels_admin/backupsource/{backup.pk}/change/">'
        "backup by hand</a></td><td>http://backup.example/one.ts</td><td>{}</td></tr>"
    ) in html
    assert (
        f'<a href="{ADD}?playlist={sources.pk}&amp;channel_key=one.de">Add a backup by hand</a>'
        " (channel key one.de)"
    ) in html


def test_add_a_backup_by_hand(staff_client, sources):
    form = staff_client.get(f"{ADD}?playlist={sources.pk}&channel_key=one.de")

    response = staff_client.post(
        ADD,
        {
            "playlist": sources.pk,
            "channel_key": "one.de",
            "position": "1",
            "url": "https://backup.example/one.m3u8",
            "headers": '{"Referer": "https://one.example/"}',
        },
    )

    assert form.status_code == 200
    assert form.context["adminform"].form.initial["channel_key"] == "one.de"
    assert response.status_code == 302
    backup = BackupSource.objects.get()
    assert (backup.playlist, backup.channel_key, backup.position, backup.url, backup.headers) == (
        sources,
        "one.de",
        1,
        "https://backup.example/one.m3u8",
        {"Referer": "https://one.example/"},
    )


URL_ERROR = "The URL must start with http:// or https:// and name a host."
HEADERS_ERROR = (
    'Headers must be a JSON object of header names to text values, e.g. {"Referer": '
    '"https://example.org/"}: each name a header name, each value one line of text.'
)


@pytest.mark.parametrize(
    ("field", "value", "errors"),
    [
        ("url", "ftp://backup.example/one.ts", {"url": [URL_ERROR]}),
        ("url", "http://", {"url": [URL_ERROR]}),
        ("url", "backup.example/one.ts", {"url": [URL_ERROR]}),
        ("headers", '["Referer"]', {"headers": [HEADERS_ERROR]}),
        ("headers", '{"X-Count": 3}', {"headers": [HEADERS_ERROR]}),
        ("headers", '{"Bad Name": "v"}', {"headers": [HEADERS_ERROR]}),
        ("headers", '{"X-Split": "a\\r\\nb"}', {"headers": [HEADERS_ERROR]}),
        ("headers", "{not json", {"headers": ["Enter a valid JSON."]}),
        (
            "channel_key",
            "three.de",
            {
                "channel_key": [
                    "No channel of default has the key 'three.de' (its tvg-id or, for an entry "
                    "without one, its channel ID). Open the channel in Channels and follow “Add a "
                    "backup by hand”."
                ]
            },
        ),
    ],
)
def test_an_invalid_backup_is_refused_and_nothing_is_saved(
    staff_client, sources, field, value, errors
):
    data = {
        "playlist": sources.pk,
        "channel_key": "one.de",
        "position": "0",
        "url": "http://backup.example/one.ts",
        "headers": "{}",
    }

    response = staff_client.post(ADD, {**data, field: value})

    assert response.status_code == 200
    assert form_of(response) == errors
    assert BackupSource.objects.count() == 0


def test_an_orphaned_backup_is_shown_and_stays_editable(staff_client, sources, playlist_file):
    BackupSource.objects.create(playlist=sources, channel_key="one.de", url="http://x.example/a")
    backup = BackupSource.objects.get()
    playlist_file('#EXTM3U\n#EXTINF:-1 tvg-id="two.de",Two\nhttp://a.example/two.ts\n')
    playlist_reload()

    page = staff_client.get(f"/admin/channels_admin/backupsource/{backup.pk}/change/")
    orphaned = staff_client.get("/admin/channels_admin/backupsource/?listed=no")
    listed = staff_client.get("/admin/channels_admin/backupsource/?listed=yes")
    response = staff_client.post(
        f"/admin/channels_admin/backupsource/{backup.pk}/change/",
        {
            "playlist": sources.pk,
            "channel_key": "one.de",
            "position": "4",
            "url": "http://x.example/a",
            "headers": "{}",
        },
    )

    assert "none: orphaned (kept, unused until the key is in the playlist again)" in (
        page.content.decode()
    )
    assert [b.pk for b in orphaned.context["cl"].result_list] == [backup.pk]
    assert list(listed.context["cl"].result_list) == []
    assert response.status_code == 302
    assert BackupSource.objects.get().position == 4


def test_backup_page_links_the_channels_with_its_key(staff_client, sources):
    BackupSource.objects.create(playlist=sources, channel_key="one.de", url="http://x.example/a")
    backup = BackupSource.objects.get()
    one, one_hd = Channel.objects.order_by("position")

    page = staff_client.get(f"/admin/channels_admin/backupsource/{backup.pk}/change/")
    searched = staff_client.get("/admin/channels_admin/backupsource/?q=x.example")

    assert (
        f'<a href="/admin/channels_admin/channel/{one.pk}/change/">One</a>, '
        f'<a href="/admin/channels_admin/channel/{one_hd.pk}/change/">One HD</a>'
    ) in page.content.decode()
    assert [b.pk for b in searched.context["cl"].result_list] == [backup.pk]


# Still channels: their pictures are not judged

STILL_ADD = "/admin/channels_admin/stillchannel/add/"


def test_a_channel_is_filed_as_still_from_its_page(staff_client, sources):
    channel = Channel.objects.get(name="One HD")
    before = staff_client.get(f"/admin/channels_admin/channel/{channel.pk}/change/")

    refused = staff_client.post(
        STILL_ADD, {"playlist": sources.pk, "channel_key": "three.de", "note": ""}
    )
    added = staff_client.post(
        STILL_ADD, {"playlist": sources.pk, "channel_key": "one.de", "note": "a radio card"}
    )
    after = staff_client.get(f"/admin/channels_admin/channel/{channel.pk}/change/")

    assert (
        "on (a frozen or black picture fails a source over). "
        f'<a href="{STILL_ADD}?playlist={sources.pk}&amp;channel_key=one.de">Its picture is '
        "still by design: turn them off</a>"
    ) in before.content.decode()
    assert form_of(refused) == {
        "channel_key": [
            "No channel of default has the key 'three.de' (its tvg-id or, for an entry without "
            "one, its channel ID)."
        ]
    }
    assert added.status_code == 302
    assert list(StillChannel.objects.values_list("channel_key", "note")) == [
        ("one.de", "a radio card")
    ]
    assert (
        'off: <a href="/admin/channels_admin/stillchannel/?channel_key=one.de">a still channel</a>'
    ) in after.content.decode()


def test_a_schedule_entry_is_added_with_the_apis_form(staff_client, playlist_file):
    playlist_file(m3u(("news", "News", "http://127.0.0.1:9/1.ts")))
    playlist_reload()
    form = {
        "name": "Morning",
        "channel_id": "news",
        "enabled": "on",
        "kind": "weekly",
        "time_of_day": "07:00",
        "weekdays": ["0", "6"],
        "missed": "skip",
    }

    refused = staff_client.post(
        "/admin/channels_admin/scheduleentry/add/", {**form, "channel_id": "gone"}
    )
    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    past = staff_client.post(
        "/admin/channels_admin/scheduleentry/add/",
        {**form, "kind": "once", "at_0": yesterday.isoformat(), "at_1": "07:00:00"},
    )
    added = staff_client.post("/admin/channels_admin/scheduleentry/add/", form)

    assert refused.status_code == 200  # the form again, with the reason
    assert "No channel of the playlist has this ID." in refused.content.decode()
    assert past.status_code == 200
    assert f"{yesterday} 07:00:00 has passed (now " in past.content.decode()
    assert added.status_code == 302
    entry = ScheduleEntry.objects.get()
    assert (entry.name, entry.weekdays, entry.time_of_day) == ("Morning", [0, 6], dt.time(7))
    assert entry.edited_at is not None
