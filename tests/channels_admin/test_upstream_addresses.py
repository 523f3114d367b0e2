"""A playlist cannot point the hub at the server itself: on the real server, a channel whose
sources are the server's own admin API (by its loopback address, by ``localhost``, and through a
redirect from an allowed provider) is never fetched, and the status says why. Before, the hub
fetched ``http://127.0.0.1:<port>/api/admin/status`` from loopback, where it counts as trusted.

The tests' providers listen on loopback, which the tests' servers allow
(``CHANNELS_UPSTREAM_ALLOW``); this one allows only 127.0.0.2, where the redirecting provider
listens, so the default refusal of loopback applies to the rest."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from channels_admin.streaming.upstream_addresses import REFUSED
from tests.channels_admin.stream_client import select, wait_until
from tests.conftest import free_port, running_server

ALLOWED_HOST = "127.0.0.2"


class Redirector:
    """A provider on 127.0.0.2 that answers every request with a redirect to ``target``."""

    def __init__(self, target: str) -> None:
        self.hits = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer((ALLOWED_HOST, 0), Handler)
        self.url = f"http://{ALLOWED_HOST}:{self._server.server_address[1]}/live.ts"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def attack(tmp_path: Path) -> Iterator[tuple[str, Path, Redirector]]:
    port = free_port()
    own = f"127.0.0.1:{port}/api/admin/status"
    redirector = Redirector(f"http://{own}")
    playlist = tmp_path / "channels.m3u"
    playlist.write_text(
        "#EXTM3U\n"
        '#EXTINF:-1 tvg-id="own",Own\n'
        f"{redirector.url}\n"
        '#EXTINF:-1 tvg-id="own",Own (backup)\n'
        f"http://{own}\n"
        '#EXTINF:-1 tvg-id="own",Own (second backup)\n'
        f"http://localhost:{port}/api/admin/status\n",
        encoding="utf-8",
    )
    try:
        with running_server(
            tmp_path,
            port=port,
            CHANNELS_PLAYLIST_PATH=str(playlist),
            CHANNELS_DEMO="0",
            CHANNELS_SWITCH_TIMEOUT_SEC="2",
            CHANNELS_UPSTREAM_ALLOW=ALLOWED_HOST,
        ) as server:
            yield server, tmp_path / "daphne.log", redirector
    finally:
        redirector.close()


def test_the_hub_never_fetches_the_servers_own_admin_api(attack) -> None:
    server, log, redirector = attack
    asked = 0

    def status() -> dict:
        nonlocal asked
        asked += 1
        return requests.get(f"{server}/api/admin/status", timeout=5).json()

    # when an admin selects the channel, and the hub goes round its sources twice
    select(server, "own")
    wait_until(lambda: redirector.hits >= 2, timeout=20, what="two rounds of the sources")
    now = status()
    time.sleep(0.5)  # the access log's lines of any request still in flight

    # then the allowed provider was asked, its redirect to the server was not followed, and
    # neither of the server's own addresses was fetched: every status request is the test's
    assert now["last_failure"]["reason"] == REFUSED
    assert (now["channel_name"], now["live"], now["reconnecting"]) == ("Own", True, True)
    assert log.read_text().count('"GET /api/admin/status"') == asked
    assert "Traceback" not in log.read_text()
