"""Fixtures of the channel admin tests: playlists on disk and a real upstream HTTP server."""

from __future__ import annotations

import pytest

from loopback_fakes.ts_upstream import TsUpstream


def m3u(*entries: tuple[str, str, str]) -> str:
    """An extended M3U text of (tvg-id, name, url) entries, grouped alternately News/Sport."""
    lines = ["#EXTM3U"]
    for index, (tvg_id, name, url) in enumerate(entries):
        group = "News" if index % 2 == 0 else "Sport"
        lines.append(
            f'#EXTINF:-1 tvg-id="{tvg_id}" tvg-logo="http://logo/{index}.png" '
            f'group-title="{group}",{name}'
        )
        lines.append(url)
    return "\n".join(lines) + "\n"


@pytest.fixture
def playlist_file(tmp_path, settings):
    """Point the settings at a playlist file in tmp_path; returns a writer for it."""
    path = tmp_path / "playlist.m3u"
    settings.CHANNELS_PLAYLIST_PATH = str(path)
    settings.CHANNELS_PLAYLIST_URL = ""

    def write(text: str) -> str:
        path.write_text(text, encoding="utf-8")
        return str(path)

    write.path = path
    return write


@pytest.fixture
def upstream():
    server = TsUpstream()
    yield server
    server.close()
