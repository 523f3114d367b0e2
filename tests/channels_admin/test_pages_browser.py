"""The viewer and admin pages in a real browser against the real server and its demo channels."""

from __future__ import annotations

import contextlib

import pytest
import requests

from tests.conftest import free_port, manage, project_env, running_server

PLAYING = """() => {
    const video = document.getElementById("player");
    return video.readyState >= 2 && video.currentTime > 1;
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("pages-var")
    port = free_port()
    # One viewer at most: the pages' own players stay within it, one at a time.
    env = {"SERVER_URL": f"http://127.0.0.1:{port}", "CHANNELS_MAX_VIEWERS": "1"}
    with running_server(var_dir, port=port, **env) as base_url:
        created = manage(
            "createsuperuser",
            "--noinput",
            "--username=admin",
            "--email=admin@example.org",
            env=project_env(var_dir, DJANGO_SUPERUSER_PASSWORD="a-long-test-password", **env),
        )
        assert created.returncode == 0, created.stderr
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
    page.fill("#id_password", "a-long-test-password")
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
