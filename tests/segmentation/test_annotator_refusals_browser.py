"""The annotator when the server makes it wait, in a real browser (Debian's Chromium) against the
real server (issue 48, item 2; issue 50): a reload after a restart gives the lost session's work
back from the server's store without waiting on engine time, and an operation the server refuses
for a while is counted down on the page and sent again by itself, with the clicks made meanwhile
said to wait and then sent. The module's one server, restarted on the same port (the tab's
origin) and VAR_DIR (whose database keeps the work), lets a session spend a burst of one
engine-second, then a tenth of a core (so that the countdown's waits are short), or a hundredth
once the restart test has restarted it (so that a replay charged as new work would be refused)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect

from segmentation.demo_video import demo_masks
from tests.conftest import free_port, running_server
from tests.segmentation.test_annotator_browser import (
    click_at,
    farthest,
    open_default_video,
    server_annotations,
)
from tests.segmentation.test_annotator_import_browser import ENDED
from tests.segmentation.test_annotator_restore_browser import RECORD_MESSAGES
from tests.segmentation.test_annotator_workplace_browser import click_on_box, go_to
from tests.segmentation.test_engine_budget import click

# The client's cost limit is not what these tests are about (the replay is charged to it).
LIMITS = {"SESSION_ENGINE_BURST_SEC": "1", "RATE_LIMIT_COST": "100000/m"}
CLICKED = (0, 30, 60, 90)  # the frames the restart test clicks on, 0-based
# 0-based: the restart test's propagation ends on its last clicked frame (the whole video's 144
# frames took seconds more of two loaded cores, and gave the store nothing else to give back)
END = CLICKED[-1]
WAIT = "This session has used its share of the engine for now"


class Server:
    """The real server on a port of its own, restarted on demand, with its share of a core for
    each session given anew (each start with its own log)."""

    def __init__(self, var_dir: Path, *, share_percent: int) -> None:
        self.var_dir, self.port, self.starts = var_dir, free_port(), 0
        self._running = contextlib.ExitStack()
        self.start(share_percent)

    def start(self, share_percent: int) -> None:
        self.starts += 1
        self.share_percent = share_percent
        limits = {**LIMITS, "SESSION_ENGINE_SHARE_PERCENT": str(share_percent)}
        log = f"daphne-{self.starts}.log"
        self.url = self._running.enter_context(
            running_server(self.var_dir, port=self.port, log_name=log, **limits)
        )

    def restart(self, share_percent: int) -> None:
        self._running.close()
        self.start(share_percent)

    def stop(self) -> None:
        self._running.close()


# A session's share of a core: a tenth, so that the countdown test's waits are short; a
# hundredth after the restart, so that a replay charged as new work would be refused.
WAITING_SHARE, RESTARTED_SHARE = 10, 1


@pytest.fixture(scope="module")
def server(default_video_var: Path) -> Iterator[Server]:
    """One server for the module (a start is seconds of two loaded cores): the countdown test
    runs first, on it as started; the restart test restarts it."""
    server = Server(default_video_var, share_percent=WAITING_SHARE)
    yield server
    server.stop()


def added_points(request) -> list[int]:
    """The point count of the clicks a request of the page sends (none if it sends none)."""
    if request.method != "POST" or "addPoints(" not in (request.post_data or ""):
        return []
    return [len(json.loads(request.post_data)["variables"]["input"]["points"])]


def spend_engine_time(server: str, session_id: str) -> int:
    """Click on the session from outside the page, a new frame each time, until the session is
    refused with a wait of at least 2 s (a shorter one is waited out first); the wait. Each click
    has 6 points: one click's engine time must overdraw the bucket by more than one second's
    refill, and a quick click of one point can leave it just below empty each time (refused for
    1 s, refilled, taken again) until the frames run out, as one run of the suite did."""
    for frame_index in range(20, 80):
        answer = click(server, session_id, frame=frame_index, points=6)
        wait = int(answer.headers.get("Retry-After", 0))
        if wait >= 2:
            return wait
        time.sleep(wait)
    raise AssertionError("the session's engine time was never spent")


def test_a_refused_click_is_counted_down_and_sent_again_with_the_clicks_made_meanwhile(
    server, page
) -> None:
    if server.share_percent != WAITING_SHARE:  # the restart test ran first
        server.restart(share_percent=WAITING_SHARE)
    # given a session whose engine time has just been spent, and frame 11 shown
    session_id = open_default_video(server.url, page)
    go_to(page, 11)
    page.evaluate(RECORD_MESSAGES)
    wait = spend_engine_time(server.url, session_id)
    sent_points = []  # the point count of each click the page sends
    page.on("request", lambda request: sent_points.extend(added_points(request)))

    # when the person clicks on the box, then once more beside that click
    box = demo_masks(10)["box"]
    x, y = farthest(box, (-100, -100))
    click_at(page, x, y)
    expect(page.locator("#message")).to_contain_text(f"{WAIT}; sending again in")
    second = farthest(box, (x, y))
    click_at(page, *second)

    # then the page counts the wait down, says the second click waits, and sends both
    def sent() -> list[list[float]] | None:
        for frame in server_annotations(server.url, session_id)["frames"]:
            for item in frame["objects"]:
                if frame["frame_index"] == 10 and item["object_id"] == 1:
                    return item.get("points")
        return None

    deadline = time.monotonic() + wait + 20
    while (sent() is None or len(sent()) != 2) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(sent() or []) == 2
    waits = [text for text, _ in page.evaluate("window.shown") if text.startswith(WAIT)]
    assert waits[0] in {f"{WAIT}; sending again in {n} s." for n in range(1, wait + 1)}
    assert any(text.endswith(" 1 more change waits to be sent.") for text in waits), waits
    expect(page.locator("#message")).to_have_text("")
    assert page.text_content("#objects li.selected .object-pick") == (
        "Object 1 · clicked on 1 frame"
    )
    # the first click, refused; then sent again with the second, whose own turn finds its
    # points sent and sends nothing (it had sent them once more, to be refused in turn)
    # (the page's requests reach the test while it waits on the page, as above)
    assert sent_points == [1, 2]
    assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_a_reload_after_a_restart_gives_the_work_back_from_the_store_without_waiting(
    server, page
) -> None:
    # given the box clicked on four frames, the last marked as the end, and propagated to it
    first = open_default_video(server.url, page)
    for frame_index in CLICKED:
        go_to(page, frame_index + 1)
        click_on_box(page, frame_index)
    page.keyboard.press("e")
    expect(page.locator("#mark-end")).to_have_text(f"Clear end (frame {END + 1})")
    go_to(page, 1)
    page.click("#propagate")
    page.wait_for_selector("#editor[data-propagated=done]", timeout=60_000)
    assert page.text_content("#progress-label") == f"Done: {END + 1} frames from frame 1."

    # when the server restarts and the page is reloaded
    server.restart(share_percent=RESTARTED_SHARE)
    refused = []
    page.on("response", lambda r: refused.append(r.url) if r.status == 429 else None)
    page.reload()
    page.wait_for_selector("#editor[data-ready=true]")

    # then a new session has the work from the store at once, without a refusal
    assert page.text_content("#message") == ENDED
    assert refused == []
    second = page.get_attribute("#editor", "data-session-id")
    assert second != first
    assert page.get_attribute("#timeline", "data-mask-runs") == f"0-{END}"
    assert page.get_attribute("#timeline", "data-prompted") == ",".join(map(str, CLICKED))
    frames = server_annotations(server.url, second)["frames"]
    assert [frame["frame_index"] for frame in frames] == list(range(END + 1))
    assert page.is_enabled("#propagate")
    assert page.is_enabled("#add-object")
