"""What the viewer and admin pages say, in a real browser, when the stream does not simply
play: no channel yet, a switch to a dead channel, a failover to a backup, a server gone. The
real server with a real origin of real MPEG-TS (loopback_fakes/media_upstream.py)."""

from __future__ import annotations

import os
import signal
from datetime import datetime

import pytest

from loopback_fakes.media_upstream import Behaviour, Look, MediaUpstream
from tests.channels_admin.stream_client import select, status, wait_until
from tests.channels_admin.test_failover_server import SWITCH_TIMEOUT_SEC, server_for
from tests.channels_admin.test_pages_browser import PLAYING, admin_login
from tests.conftest import manage, project_env, server_pid

NO_CHANNEL = "No channel is on yet. An administrator picks one on the channel page."
UNREACHABLE = "The server cannot be reached; trying again…"
# Each change of the element's text, in order, in window.seen[id].
RECORD_CHANGES = """(id) => {
    const element = document.getElementById(id);
    const seen = (window.seen ??= {})[id] = [element.textContent];
    new MutationObserver(() => {
        if (element.textContent !== seen.at(-1)) seen.push(element.textContent);
    }).observe(element, { childList: true, characterData: true, subtree: true });
}"""


# What a player shows, summed over the players the page builds (each starts its clock at 0), the
# MediaSources they made, and what the page threw or logged as an error.
WATCH_THE_PLAYERS = """
window.watched = 0;
let last = null;
document.addEventListener("timeupdate", (event) => {
    const step = event.target.currentTime - last;
    if (last !== null && step > 0 && step < 1) window.watched += step;
    last = event.target.currentTime;
}, true);
const NativeMediaSource = window.MediaSource;
window.mediaSources = [];
window.MediaSource = class extends NativeMediaSource {
    constructor() { super(); window.mediaSources.push(this); }
};
"""
OPEN_MEDIA_SOURCES = """() => window.mediaSources
    .filter((source) => source.readyState !== "closed")
    .map((source) => source.sourceBuffers.length)"""


@pytest.fixture(scope="module")
def origin():
    # Solo: one source like the one of issue 48, Baseline without sound, the slate's size
    server = MediaUpstream(looks={"/solo.ts": Look(width=640, profile="baseline", audio=False)})
    yield server
    server.close()


def superuser_create(var_dir) -> None:
    """The staff user that test_pages_browser.admin_login logs in as."""
    created = manage(
        "createsuperuser",
        "--noinput",
        "--username=admin",
        "--email=admin@example.org",
        env=project_env(var_dir, DJANGO_SUPERUSER_PASSWORD="a-long-test-password"),
    )
    assert created.returncode == 0, created.stderr


@pytest.fixture(scope="module")
def server(origin, tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("pages-failover-var")
    with server_for(origin, var_dir) as base_url:
        superuser_create(var_dir)
        yield base_url


@pytest.fixture(autouse=True)
def origin_plays(origin):
    origin.behaviour.clear()


def text_is(element_id: str, text: str) -> str:
    return f"() => document.getElementById({element_id!r}).textContent === {text!r}"


def test_the_tv_page_before_any_channel_says_who_picks_one(server, page):
    # (first in the module: no channel was ever picked on its server)
    page.goto(f"{server}/tv/")
    page.wait_for_function(text_is("message", NO_CHANNEL))
    page.shot("no-channel")

    assert page.get_attribute("#message a", "href") == "/tv/admin/"
    assert page.text_content("#message a") == "channel page"
    assert page.text_content("#state") == "off air"


def test_a_switch_to_a_dead_channel_ends_with_the_outcome_on_the_admin_page(server, page):
    select(server, "two")
    wait_until(lambda: status(server)["switch_message"] == "Now playing Two", what="playing")
    admin_login(server, page)
    page.fill("#search", "Dead")
    page.wait_for_function("() => document.querySelectorAll('#channels tr').length === 1")
    page.evaluate(RECORD_CHANGES, "message")

    page.click("#channels tr button")
    outcome = "Dead did not answer (connection refused): back on Two"
    page.wait_for_function(text_is("message", outcome), timeout=(SWITCH_TIMEOUT_SEC + 5) * 1000)
    page.wait_for_function(text_is("state", "live"))
    page.shot("back-on-two")

    assert page.evaluate("() => window.seen.message") == [
        "Now playing Two",
        "Switching to Dead…",
        outcome,
    ]
    assert page.text_content("#channel-name") == "Two"


def test_the_tv_page_tells_where_the_hub_went_back_to_after_a_dead_channel_and_why(server, page):
    select(server, "two")
    wait_until(lambda: status(server)["switch_message"] == "Now playing Two", what="playing")
    page.goto(f"{server}/tv/")
    page.wait_for_function(PLAYING, timeout=20_000)
    page.evaluate(RECORD_CHANGES, "message")
    page.evaluate(RECORD_CHANGES, "state")

    select(server, "dead")
    outcome = "Dead did not answer (connection refused): back on Two"
    page.wait_for_function(text_is("message", outcome), timeout=(SWITCH_TIMEOUT_SEC + 5) * 1000)
    page.wait_for_function(text_is("state", "live"), timeout=20_000)
    page.shot("back-on-two")

    assert page.text_content("#message") == outcome  # still told once Two plays again
    assert page.text_content("#channel-name") == "Two"
    # never "The channel's source stopped; reconnecting…" of a channel that never started
    seen = page.evaluate("() => window.seen.message")
    assert [text for text in seen if text != "Switching to Dead…"] == [
        "",
        "Dead has not answered yet; still trying…",
        outcome,
    ]
    assert "reconnecting" not in page.evaluate("() => window.seen.state")


def test_a_failover_keeps_the_tv_playing_and_the_admin_says_so(server, origin, page, browser):
    select(server, "one")
    wait_until(lambda: status(server)["switch_message"] == "Now playing One", what="playing")
    page.goto(f"{server}/tv/")
    page.wait_for_function(PLAYING, timeout=20_000)
    page.evaluate(RECORD_CHANGES, "state")

    origin.behaviour["/one-a.ts"] = Behaviour.REFUSE
    origin.drop("/one-a.ts")
    wait_until(lambda: status(server)["source"] == "backup 2 of 2", what="the backup plays")
    played = page.evaluate("() => document.getElementById('player').currentTime")
    page.wait_for_function(
        f"() => document.getElementById('player').currentTime > {played} + 2", timeout=10_000
    )
    page.shot("on-the-backup")

    assert set(page.evaluate("() => window.seen.state")) <= {"live", "reconnecting"}
    assert page.text_content("#state") == "live"
    assert page.text_content("#message") == ""

    admin = browser.new_context().new_page()
    try:
        admin_login(server, admin)
        failure = status(server)["last_failure"]
        at = datetime.fromisoformat(failure["at"]).astimezone().strftime("%H:%M:%S")
        assert admin.text_content("#status-details") == (
            "playlist version 1 · 1 viewer · backup 2 of 2 · 1 failover"
            f" · primary failed {at}: the upstream ended the stream"
        )
    finally:
        admin.context.close()


def console_error(message, errors: list[str]) -> None:
    """Keep an error the page logged; not the favicon the site does not have."""
    if message.type == "error" and not message.location["url"].endswith("/favicon.ico"):
        errors.append(message.text)


def watched(page) -> float:
    return page.evaluate("() => window.watched")


def test_a_viewer_who_sits_through_an_outage_plays_again_when_the_source_returns(
    server, origin, page
):
    # the source is H.264 Baseline without sound, the slate Main with sound, both 640x360
    errors = []
    page.on("pageerror", lambda error: errors.append(error.message))
    page.on("console", lambda message: console_error(message, errors))
    select(server, "solo")
    wait_until(lambda: status(server)["switch_message"] == "Now playing Solo", what="playing")
    page.add_init_script(WATCH_THE_PLAYERS)
    page.goto(f"{server}/tv/")
    page.wait_for_function(PLAYING, timeout=20_000)

    origin.behaviour["/solo.ts"] = Behaviour.REFUSE
    origin.drop("/solo.ts")
    wait_until(lambda: status(server)["reconnecting"], what="the outage")
    before = watched(page)
    page.wait_for_function(f"() => window.watched > {before} + 1", timeout=10_000)  # the slate
    origin.behaviour.clear()
    wait_until(lambda: status(server)["source"] == "primary", timeout=20, what="the return")
    returned = watched(page)
    page.wait_for_function(f"() => window.watched > {returned} + 2", timeout=10_000)
    page.shot("back-from-the-outage")

    assert page.text_content("#state") == "live"
    assert page.text_content("#message") == ""
    # a player each for the source, the slate and the source again; the last one's alone open
    assert page.evaluate("() => window.mediaSources.length") == 3
    assert page.evaluate(OPEN_MEDIA_SOURCES) == [1]
    assert errors == []


def test_the_pages_say_when_the_server_cannot_be_reached(server, page, browser):
    # (last in the module: it stops the module's server)
    admin = browser.new_context().new_page()
    try:
        select(server, "two")
        wait_until(lambda: status(server)["switch_message"] == "Now playing Two", what="playing")
        page.goto(f"{server}/tv/")
        page.wait_for_function(PLAYING, timeout=20_000)
        assert page.text_content("#state") == "live"
        admin_login(server, admin)
        admin.wait_for_function(text_is("state", "live"))
        process = server_pid(server)
        os.kill(process, signal.SIGTERM)  # as the server's context does at its end
        wait_until(lambda: not pid_exists(process), what="the server process stopped")

        page.wait_for_function(text_is("message", UNREACHABLE), timeout=10_000)
        admin.wait_for_function(text_is("message", UNREACHABLE), timeout=10_000)
        page.wait_for_timeout(1500)  # the player's own retries change nothing
        page.shot("unreachable")

        assert page.text_content("#message") == UNREACHABLE
        assert page.text_content("#state") == "no connection"
        assert admin.text_content("#state") == "no connection"
    finally:
        admin.context.close()


def pid_exists(pid: int) -> bool:
    """Whether ``pid`` is still a process of its own (not one that exited, a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
