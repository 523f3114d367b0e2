"""A channel's sources: its own stream, the playlist's other streams of its tvg-id, and the
backups added by hand, which outlive reloads."""

from __future__ import annotations

import pytest

from channels_admin.models import BackupSource, Channel, Playlist, StillChannel
from channels_admin.selectors import channel_sources
from channels_admin.services.playlists import playlist_reload
from channels_admin.services.switch import channel_select

pytestmark = pytest.mark.django_db

PLAYLIST = """#EXTM3U
#EXTINF:-1 tvg-id="one.de",One
#EXTVLCOPT:http-user-agent=Box/1.0
http://a.example/one.m3u8
#EXTINF:-1 tvg-id="two.de",Two
http://a.example/two.ts
#EXTINF:-1 tvg-id="one.de",One HD
#EXTHTTP:{"cookie": "k=v"}
https://b.example/one-hd.m3u8
#EXTINF:-1 tvg-id="one.de",One again
http://a.example/one.m3u8
#EXTINF:-1 tvg-id="one.de",One RTMP
rtmp://c.example/one
#EXTINF:-1 tvg-id="one.de",One SD
#EXTVLCOPT:http-referrer=https://one.example/
http://c.example/one-sd.ts
#EXTINF:-1,Untagged
http://d.example/untagged.ts
"""

ONE = ("http://a.example/one.m3u8", {"User-Agent": "Box/1.0"})
ONE_HD = ("https://b.example/one-hd.m3u8", {"Cookie": "k=v"})
ONE_SD = ("http://c.example/one-sd.ts", {"Referer": "https://one.example/"})


@pytest.fixture
def loaded(playlist_file, settings):
    settings.CHANNELS_DEMO = False
    playlist_file(PLAYLIST)
    playlist_reload()
    return playlist_file


def sources_of(name: str) -> list[tuple[str, dict[str, str]]]:
    channel = Channel.objects.get(name=name)
    return [(source.url, dict(source.headers)) for source in channel_sources(channel=channel)]


def backup(key: str, position: int, url: str, headers: dict[str, str] | None = None) -> None:
    BackupSource.objects.create(
        playlist=Playlist.objects.get(), channel_key=key, position=position, url=url,
        headers=headers or {},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # the chosen entry, then the others of its tvg-id in playlist order; a URL once, and
        # no rtmp:// backup
        ("One", [ONE, ONE_HD, ONE_SD]),
        ("One HD", [ONE_HD, ONE, ONE_SD]),
        ("One again", [("http://a.example/one.m3u8", {}), ONE_HD, ONE_SD]),
        ("One SD", [ONE_SD, ONE, ONE_HD]),
        # chosen, it is still the first (selecting it is refused elsewhere)
        ("One RTMP", [("rtmp://c.example/one", {}), ONE, ONE_HD, ONE_SD]),
        ("Two", [("http://a.example/two.ts", {})]),
        ("Untagged", [("http://d.example/untagged.ts", {})]),
    ],
)
def test_entries_sharing_a_tvg_id_are_each_others_sources(loaded, name, expected):
    assert sources_of(name) == expected


def test_every_entry_stays_selectable_by_its_own_id(loaded):
    ids = list(Channel.objects.filter(tvg_id="one.de").values_list("channel_id", flat=True))

    assert len(ids) == 5
    assert ids[0] == "one.de"
    assert all(channel_id.startswith("one.de~") for channel_id in ids[1:])


def test_backups_by_hand_come_last_in_their_order(loaded, django_assert_num_queries):
    backup("one.de", 2, "https://backup.example/second.m3u8", {"X-Token": "t"})
    backup("one.de", 1, "http://backup.example/first.ts")
    backup("one.de", 3, "http://c.example/one-sd.ts")  # the playlist has it already
    backup("two.de", 1, "http://backup.example/two.ts")
    channel = Channel.objects.get(name="One HD")

    with django_assert_num_queries(2):
        sources = channel_sources(channel=channel)

    assert [(source.url, dict(source.headers)) for source in sources] == [
        ONE_HD,
        ONE,
        ONE_SD,
        ("http://backup.example/first.ts", {}),
        ("https://backup.example/second.m3u8", {"X-Token": "t"}),
    ]


def test_an_entry_without_tvg_id_files_its_backups_under_its_channel_id(
    loaded, django_assert_num_queries
):
    channel = Channel.objects.get(name="Untagged")
    backup(channel.channel_id, 0, "http://backup.example/untagged.ts")

    with django_assert_num_queries(1):
        sources = channel_sources(channel=channel)

    assert channel.source_key == channel.channel_id
    assert channel.channel_id.startswith("ch-")
    assert [source.url for source in sources] == [
        "http://d.example/untagged.ts",
        "http://backup.example/untagged.ts",
    ]


def test_a_backup_survives_reloads_and_rests_while_its_channel_is_gone(loaded):
    backup("one.de", 0, "http://backup.example/one.ts")
    with_one = PLAYLIST
    without_one = '#EXTM3U\n#EXTINF:-1 tvg-id="two.de",Two\nhttp://a.example/two.ts\n'

    playlist_reload()
    after_reload = sources_of("One")[-1]
    loaded(without_one)
    playlist_reload()
    orphaned = list(BackupSource.objects.with_listed().values_list("channel_key", "listed"))
    two = sources_of("Two")
    loaded(with_one)
    playlist_reload()

    assert after_reload == ("http://backup.example/one.ts", {})
    assert orphaned == [("one.de", False)]  # kept, but no channel uses it
    assert two == [("http://a.example/two.ts", {})]
    assert sources_of("One") == [ONE, ONE_HD, ONE_SD, ("http://backup.example/one.ts", {})]
    assert list(BackupSource.objects.with_listed().values_list("listed", flat=True)) == [True]


def test_a_backup_the_hub_cannot_relay_is_left_out(loaded):
    # the admin refuses such a URL; a row written by other means is skipped all the same
    backup("two.de", 0, "udp://239.0.0.1:1234")

    assert sources_of("Two") == [("http://a.example/two.ts", {})]


def test_a_still_channel_is_switched_to_with_its_pictures_unjudged_after_reloads(loaded):
    # given the channel filed as still, then a reload (which replaces every channel row)
    StillChannel.objects.create(playlist=Playlist.objects.get(), channel_key="one.de")
    playlist_reload()

    _, state, sources = channel_select(channel_id="one.de")
    _, _, others = channel_select(channel_id="two.de")

    assert [(source.url, source.picture_checks) for source in sources] == [
        (ONE[0], False),
        (ONE_HD[0], False),
        (ONE_SD[0], False),
    ]
    assert state.sources[0] == {"url": ONE[0], "headers": ONE[1], "picture_checks": False}
    assert [source.picture_checks for source in state.upstreams] == [False, False, False]
    assert [(source.url, source.picture_checks) for source in others] == [
        ("http://a.example/two.ts", True)
    ]
