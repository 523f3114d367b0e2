"""The viewer and admin pages in a real browser against the real server and its demo channels."""

from __future__ import annotations

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
    env = {"SERVER_URL": f"http://127.0.0.1:{port}"}
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


def test_admin_page_needs_a_staff_login(server, page):
    page.goto(f"{server}/tv/admin/")

    assert "/admin/login/" in page.url


def test_admin_page_searches_and_selects_a_channel(server, page):
    page.goto(f"{server}/admin/login/?next=/tv/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "a-long-test-password")
    page.click("input[type=submit]")
    page.wait_for_selector("#channels tr")

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
