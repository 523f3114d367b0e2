"""Reloading the playlist from a file or URL; a failure changes nothing."""

from __future__ import annotations

import hashlib
import http.server
import threading
from io import StringIO

import pytest
from django.core.management import ManagementUtility, call_command
from django.core.management.base import CommandError

from channels_admin.errors import PlaylistReloadError
from channels_admin.models import Channel, Playlist, StreamState
from channels_admin.services.playlists import (
    default_playlist_text,
    playlist_ensure_loaded,
    playlist_reload,
)
from tests.channels_admin.conftest import m3u

pytestmark = pytest.mark.django_db

THREE = m3u(
    ("a.de", "Alpha", "http://tv.example/a.ts"),
    ("b.de", "Beta", "http://tv.example/b.ts"),
    ("a.de", "Alpha HD", "http://tv.example/a-hd.ts"),
)


@pytest.fixture(autouse=True)
def playlist_entries_only(settings):
    """These tests are about the playlist's own entries: the demo channels that follow them
    (``CHANNELS_DEMO``) are left out, except in the tests about them."""
    settings.CHANNELS_DEMO = False


def listing() -> list[tuple[str, str, str]]:
    return list(Channel.objects.order_by("position").values_list("channel_id", "name", "group"))


@pytest.fixture
def served():
    """A loopback HTTP server answering GET with whatever the test puts in ``served``."""
    responses: dict[str, tuple[int, bytes]] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = responses.get(self.path, (404, b"not found"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # a short poll: shutdown() waits for the loop's next look (0.5 s by default, each test)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    responses["base"] = (0, f"http://127.0.0.1:{server.server_port}".encode())
    yield responses
    server.shutdown()
    server.server_close()


def url_of(served: dict, path: str) -> str:
    return served["base"][1].decode() + path


def test_reload_from_file_replaces_the_list_and_bumps_the_version(playlist_file):
    playlist_file(THREE)

    first = playlist_reload()
    playlist_file(m3u(("c.de", "Gamma", "http://tv.example/c.ts")))
    second = playlist_reload()

    assert (first.channels, first.version) == (3, 1)
    assert (second.channels, second.version) == (1, 2)
    assert listing() == [("c.de", "Gamma", "News")]


def test_duplicate_tvg_ids_get_stable_derived_ids(playlist_file):
    playlist_file(THREE)

    playlist_reload()
    first = listing()
    playlist_reload()

    assert listing() == first
    assert [row[0] for row in first][:2] == ["a.de", "b.de"]
    assert first[2][0].startswith("a.de~")
    assert len({row[0] for row in first}) == 3


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (b"", "empty"),
        (b"<!DOCTYPE html><html><head><title>Login</title></head></html>", "HTML"),
        (bytes(range(256)) * 4, "binary"),
        (b"#EXTM3U\n# nothing here\n", "no channel"),
    ],
)
def test_a_file_that_is_not_a_playlist_changes_nothing(playlist_file, content, detail):
    playlist_file(THREE)
    playlist_reload()
    before = listing()
    playlist_file.path.write_bytes(content)

    with pytest.raises(PlaylistReloadError) as error:
        playlist_reload()

    assert detail.casefold() in str(error.value).casefold()
    assert listing() == before
    playlist = Playlist.objects.get()
    assert playlist.version == 1
    assert playlist.last_error == str(error.value)


def test_missing_configured_file_is_a_clear_error(playlist_file):
    with pytest.raises(PlaylistReloadError) as error:
        playlist_reload()

    assert str(error.value) == f"cannot read {playlist_file.path}: No such file or directory"
    assert Channel.objects.count() == 0


def test_reload_from_url_downloads_into_the_file_atomically(playlist_file, settings, served):
    served["/list.m3u"] = (200, THREE.encode())
    settings.CHANNELS_PLAYLIST_URL = url_of(served, "/list.m3u")

    result = playlist_reload()

    assert result.channels == 3
    assert playlist_file.path.read_text(encoding="utf-8") == THREE
    assert [p.name for p in playlist_file.path.parent.iterdir()] == ["playlist.m3u"]


@pytest.mark.parametrize(
    ("status", "body", "detail"),
    [
        (404, b"gone", "answered HTTP 404"),
        (200, b"<html><body>captive portal</body></html>", "HTML"),
        (200, b"#EXTM3U\n" + b"#EXTINF:-1,x\nhttp://x/y\n" * 5000, "larger than 1024 bytes"),
    ],
)
def test_failed_download_changes_nothing(playlist_file, settings, served, status, body, detail):
    playlist_file(THREE)
    playlist_reload()
    served["/list.m3u"] = (status, body)
    settings.CHANNELS_PLAYLIST_URL = url_of(served, "/list.m3u")
    settings.CHANNELS_PLAYLIST_MAX_BYTES = 1024

    with pytest.raises(PlaylistReloadError) as error:
        playlist_reload()

    assert detail in str(error.value)
    assert playlist_file.path.read_text(encoding="utf-8") == THREE
    assert Playlist.objects.get().version == 1
    assert len(listing()) == 3
    assert [p.name for p in playlist_file.path.parent.iterdir()] == ["playlist.m3u"]


def test_a_playlist_on_an_address_the_server_may_not_fetch_is_refused(
    playlist_file, settings, served
):
    # given the default: the server's own machine (loopback here) is not fetched
    playlist_file(THREE)
    playlist_reload()
    served["/list.m3u"] = (200, THREE.encode())
    settings.CHANNELS_PLAYLIST_URL = url_of(served, "/list.m3u")
    settings.CHANNELS_UPSTREAM_ALLOW = ()

    with pytest.raises(PlaylistReloadError) as error:
        playlist_reload()

    assert str(error.value) == (
        f"download of {settings.CHANNELS_PLAYLIST_URL} refused: its address is not one the "
        "server may fetch (CHANNELS_UPSTREAM_DENY)"
    )
    assert Playlist.objects.get().version == 1


def test_unreachable_url_changes_nothing(playlist_file, settings):
    playlist_file(THREE)
    playlist_reload()
    settings.CHANNELS_PLAYLIST_URL = "http://127.0.0.1:9/list.m3u"

    with pytest.raises(PlaylistReloadError) as error:
        playlist_reload()

    assert str(error.value).startswith("download of http://127.0.0.1:9/list.m3u failed: ")
    assert Playlist.objects.get().version == 1


def test_reload_renames_the_current_channel_by_its_stream_url(playlist_file):
    playlist_file(THREE)
    playlist_reload()
    StreamState.objects.create(
        pk=StreamState.SINGLETON_PK,
        channel_id="b.de",
        channel_name="Beta",
        current_stream_url="http://tv.example/b.ts",
        live=True,
    )
    playlist_file(
        m3u(
            ("x", "Beta (renamed)", "http://tv.example/b.ts"),
            ("y", "Beta again", "http://tv.example/b.ts"),
        )
    )

    playlist_reload()

    state = StreamState.objects.get()
    assert (state.channel_name, state.channel_id) == ("Beta (renamed)", "x")


def test_reload_keeps_the_name_when_the_stream_is_gone(playlist_file):
    playlist_file(THREE)
    playlist_reload()
    StreamState.objects.create(
        pk=StreamState.SINGLETON_PK, channel_name="Beta", current_stream_url="http://gone/b.ts"
    )

    playlist_reload()

    assert StreamState.objects.get().channel_name == "Beta"


def test_demo_channels_follow_a_configured_playlist(playlist_file, settings):
    settings.CHANNELS_DEMO = True
    settings.SERVER_URL = "http://127.0.0.1:7263"
    playlist_file(THREE)

    result = playlist_reload()

    assert result.channels == 5
    rows = Channel.objects.order_by("position").values_list(
        "position", "channel_id", "name", "group", "stream_url"
    )
    assert list(rows)[3:] == [
        (3, "demo.1", "Test pattern 1", "Demo", "http://127.0.0.1:7263/tv/demo/1.ts"),
        (4, "demo.2", "Test pattern 2", "Demo", "http://127.0.0.1:7263/tv/demo/2.ts"),
    ]
    assert [row[0] for row in listing()][:2] == ["a.de", "b.de"]


def test_demo_channels_follow_a_downloaded_playlist(playlist_file, settings, served):
    settings.CHANNELS_DEMO = True
    served["/list.m3u"] = (200, THREE.encode())
    settings.CHANNELS_PLAYLIST_URL = url_of(served, "/list.m3u")

    playlist_reload()

    assert [row[0] for row in listing()][3:] == ["demo.1", "demo.2"]
    assert playlist_file.path.read_text(encoding="utf-8") == THREE  # the file as downloaded


def test_demo_channels_take_other_ids_beside_a_playlists_own_demo_1(playlist_file, settings):
    settings.CHANNELS_DEMO = True
    settings.SERVER_URL = "http://127.0.0.1:7263"
    playlist_file(m3u(("demo.1", "Their demo", "http://tv.example/demo.ts")))

    playlist_reload()

    url = b"http://127.0.0.1:7263/tv/demo/1.ts"
    demo_1 = "demo.1~" + hashlib.sha1(url, usedforsecurity=False).hexdigest()[:8]
    assert listing() == [
        ("demo.1", "Their demo", "News"),
        (demo_1, "Test pattern 1", "Demo"),
        ("demo.2", "Test pattern 2", "Demo"),
    ]


def test_no_demo_channels_with_channels_demo_0(playlist_file, settings):
    settings.CHANNELS_DEMO = False
    playlist_file(THREE)

    result = playlist_reload()

    assert result.channels == 3
    assert not Channel.objects.filter(group="Demo").exists()


def test_default_playlist_has_the_servers_demo_channels(settings, tmp_path):
    settings.CHANNELS_DEMO = True  # and not twice
    settings.CHANNELS_PLAYLIST_PATH = ""
    settings.CHANNELS_PLAYLIST_URL = ""
    settings.CHANNELS_DEFAULT_PLAYLIST_PATH = tmp_path / "playlist.m3u"
    settings.SERVER_URL = "http://127.0.0.1:7263"

    playlist_ensure_loaded()

    assert (tmp_path / "playlist.m3u").read_text(encoding="utf-8") == default_playlist_text()
    assert list(Channel.objects.values_list("channel_id", "name", "stream_url")) == [
        ("demo.1", "Test pattern 1", "http://127.0.0.1:7263/tv/demo/1.ts"),
        ("demo.2", "Test pattern 2", "http://127.0.0.1:7263/tv/demo/2.ts"),
    ]


def test_default_playlist_follows_the_server_url_until_edited(settings, tmp_path):
    settings.CHANNELS_PLAYLIST_PATH = ""
    settings.CHANNELS_PLAYLIST_URL = ""
    settings.CHANNELS_DEFAULT_PLAYLIST_PATH = path = tmp_path / "playlist.m3u"
    settings.SERVER_URL = "http://127.0.0.1:7263"
    playlist_reload()
    settings.SERVER_URL = "http://127.0.0.1:8000"

    playlist_reload()
    moved = Channel.objects.get(channel_id="demo.1").stream_url
    path.write_text(m3u(("mine", "Mine", "http://tv.example/mine.ts")), encoding="utf-8")
    playlist_reload()

    assert moved == "http://127.0.0.1:8000/tv/demo/1.ts"
    assert list(Channel.objects.values_list("channel_id", flat=True)) == ["mine"]


def test_ensure_loaded_does_nothing_once_loaded(playlist_file):
    playlist_file(THREE)
    playlist_reload()
    playlist_file(m3u(("z", "Z", "http://tv.example/z.ts")))

    playlist_ensure_loaded()

    assert Playlist.objects.get().version == 1


def test_command_reloads(playlist_file, settings):
    settings.CHANNELS_DEMO = True
    playlist_file(THREE)
    out = StringIO()

    call_command("reload_playlist", stdout=out)

    assert out.getvalue() == "reloaded: 5 channels, version 1\n"  # the two demo channels too


def test_command_fails_with_the_reason(playlist_file):
    playlist_file("<html></html>")

    with pytest.raises(CommandError) as error:
        call_command("reload_playlist")

    assert str(error.value).startswith("failed to reload playlist: ")
    assert Channel.objects.count() == 0


# The command runs in this process, from its command line as `manage.py` hands it over (after
# the django.setup() this process has done): a process of its own, on a database migrated for
# it, took two Django start-ups (about 4 s of a core). Its run closes the database connections
# as it ends, as in its own process: so outside the test's transaction.
@pytest.mark.django_db(transaction=True)
def test_command_line_failure_exits_non_zero_with_the_reason_on_stderr(
    tmp_path, settings, capsys, caplog
):
    settings.CHANNELS_PLAYLIST_PATH = str(tmp_path / "missing.m3u")
    settings.CHANNELS_PLAYLIST_URL = ""
    argv = ["manage.py", "reload_playlist"]

    with pytest.raises(SystemExit) as exited:
        ManagementUtility(argv).fetch_command(argv[1]).run_from_argv(argv)

    assert exited.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "CommandError: failed to reload playlist: "
        f"cannot read {tmp_path / 'missing.m3u'}: No such file or directory\n"
    )
    # nor a log line, which its own process writes to stderr too (the root logger's console)
    assert [record.getMessage() for record in caplog.records] == []
