"""The Django admin: the playlist's "Reload now" action and the read-only channel list."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from channels_admin.models import Channel, Playlist
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

    assert [str(m) for m in response.context["messages"]] == ["default: 2 channels, version 2"]
    assert Channel.objects.count() == 2


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
    assert (Playlist.objects.get().version, Channel.objects.count()) == (1, 1)


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
    assert "All 2 channels" in html
    assert channel_page.status_code == 200
    assert 'name="name"' not in channel_page.content.decode()  # no editable field


def test_channel_list_searches_and_filters_by_group(staff_client, playlist_file):
    playlist_file(m3u(("a", "Alpha", "http://tv.example/a.ts"), ("b", "Beta", "http://b/b.ts")))
    playlist_reload()

    searched = staff_client.get("/admin/channels_admin/channel/?q=alp")
    filtered = staff_client.get("/admin/channels_admin/channel/?group=Sport")

    assert [c.channel_id for c in searched.context["cl"].result_list] == ["a"]
    assert [c.channel_id for c in filtered.context["cl"].result_list] == ["b"]
