"""Private viewing in Chromium against the real server: the admin page makes the stream private
and a link, the TV page plays through that link, and a revoke stops it with a sentence."""

from __future__ import annotations

import pytest

from tests.channels_admin.staffed_server import staffed_server
from tests.channels_admin.stream_client import select
from tests.channels_admin.test_pages_browser import PLAYING, admin_login


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with staffed_server(tmp_path_factory.mktemp("links-pages-var")) as base_url:
        yield base_url


def test_the_admin_makes_a_link_the_viewer_plays_it_and_a_revoke_stops_it(server, browser):
    select(server, "demo.1")
    admin = browser.new_context().new_page()
    viewer = browser.new_context().new_page()
    admin_login(server, admin)

    # the admin page: private, then a link capped at two viewers
    admin.check("#private")
    said = "(word) => document.getElementById('message').textContent.includes(word)"
    admin.wait_for_function(said, arg="private")
    admin.fill("#link-name", "Aunt Mary")
    admin.fill("#link-cap", "2")
    admin.click("#link-make")
    admin.wait_for_selector("#link-made:not([hidden])")
    url = admin.input_value("#link-url")
    # a page without the link is refused, with the reason and no player
    viewer.goto(f"{server}/tv/")
    refused = viewer.text_content("#message")
    has_player = viewer.evaluate("() => Boolean(document.getElementById('player'))")
    # the link plays, and the admin page counts its viewer
    viewer.goto(url)
    viewer.wait_for_function(PLAYING, timeout=20_000)
    admin.wait_for_function(
        """() => [...document.querySelectorAll('#links tr')].some((row) =>
            row.cells[0].textContent === 'Aunt Mary' && row.cells[3].textContent === '1')""",
        timeout=10_000,
    )
    admin.screenshot(path="test-output/screenshots/viewer-links-admin.png")
    row = admin.locator("#links tr", has_text="Aunt Mary")
    cells = row.locator("td").all_text_contents()
    # the revoke: the viewer's stream ends, and the page says why without retrying
    row.locator("button", has_text="Revoke").click()
    viewer.wait_for_function(
        "() => document.getElementById('message').textContent.includes('revoked')",
        timeout=10_000,
    )
    viewer.screenshot(path="test-output/screenshots/viewer-links-revoked.png")
    admin.wait_for_function(
        """() => [...document.querySelectorAll('#links tr')].some((row) =>
            row.cells[0].textContent === 'Aunt Mary' && row.cells[4].textContent === 'revoked')""",
        timeout=10_000,
    )

    assert url.startswith(f"{server}/tv/?t=")
    assert refused == "This stream is private: open it with the link you were given."
    assert has_player is False
    assert cells[:5] == ["Aunt Mary", "never", "2", "1", "active"]
    assert viewer.text_content("#message") == (
        "This link no longer opens the stream: it was revoked or has expired."
    )
    assert viewer.text_content("#state") == "off air"
    admin.uncheck("#private")
    admin.wait_for_function("() => document.getElementById('message').textContent.includes('open')")
