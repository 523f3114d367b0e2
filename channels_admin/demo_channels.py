"""The server's own demo channels, as its default playlist lists them: the playlist that
reloading falls back to (``services/playlists.py``), and the URLs the hub may open though they
point at this machine (``runtime.py``)."""

from __future__ import annotations

from django.conf import settings

from channels_admin.m3u import M3UEntry, m3u_parse

# The default playlist's first line after the header; while it is there, the server keeps the
# file in step with SERVER_URL (a port change must not strand the demo channels).
DEFAULT_PLAYLIST_MARK = "# The server's default playlist; delete this line to keep your edits."


def default_playlist_text() -> str:
    """The playlist used when none is configured: the server's own demo channels."""
    base = settings.SERVER_URL
    return (
        "#EXTM3U\n"
        f"{DEFAULT_PLAYLIST_MARK}\n"
        '#EXTINF:-1 tvg-id="demo.1" tvg-chno="1" group-title="Demo",Test pattern 1\n'
        f"{base}/tv/demo/1.ts\n"
        '#EXTINF:-1 tvg-id="demo.2" tvg-chno="2" group-title="Demo",Test pattern 2\n'
        f"{base}/tv/demo/2.ts\n"
    )


def demo_entries() -> list[M3UEntry]:
    """The server's demo channels, as the default playlist lists them."""
    return m3u_parse(default_playlist_text()).entries
