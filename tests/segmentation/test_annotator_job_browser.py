"""The annotator's propagation as a job, in a real browser (Debian's Chromium) against the real
server (issue 50, item 3): it goes on when the page that started it closes, a page opened again
on the video follows its progress and shows every frame's mask at its end, and a page that did
not know of it is refused a second one, follows it, and cancels it for every page."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.conftest import manage, project_env, running_server
from tests.segmentation.test_annotator_long_browser import (
    click_square,
    go_to,
    mask_drawn,
    write_long_video,
)

# test_annotator_long_browser's video cut to half its length: 64x48, still long enough
# to close a page in and open another (the page opened again found 206 of the 750 frames done on
# a lightly loaded machine, 78 with two CPU burners beside it; the cancelling page cancelled
# after 121 and 47); the 1500 frames before took seconds more of the server's CPU, and showed
# no more
FRAMES = 750
PROGRESS = re.compile(rf"(\d+) / {FRAMES} frames from frame 1")


@pytest.fixture(scope="module")
def server(tmp_path_factory, default_video_var):
    folder = tmp_path_factory.mktemp("job-library")
    write_long_video(folder / "long.mp4", frames=FRAMES)
    var_dir = default_video_var
    with running_server(var_dir) as base_url:
        done = manage("import_videos", str(folder), env=project_env(var_dir))
        assert done.returncode == 0, done.stderr
        yield base_url


def open_video(page, base_url: str, video_id: str | None = None) -> str:
    """The long video in the annotator (from the gallery, or by its ID); the video's ID."""
    if video_id is None:
        page.goto(f"{base_url}/")
        page.click(".video-card:has-text('long.mp4')")
    else:
        page.goto(f"{base_url}/annotate/?video={video_id}")
    page.wait_for_selector("#editor[data-ready=true]")
    return re.search(r"video=([^&]+)", page.url).group(1)


def jobs(page) -> list[dict]:
    """GET /propagations, as the browser (its cookie session, the jobs' owner) asks."""
    return page.evaluate("fetch('/propagations').then((r) => r.json())")["jobs"]


def progress(page) -> int:
    """The frames done that the progress label says."""
    match = PROGRESS.fullmatch(page.text_content("#progress-label"))
    assert match is not None, page.text_content("#progress-label")
    return int(match.group(1))


def test_a_job_goes_on_without_its_page_and_a_page_opened_again_follows_it_to_the_end(
    server, page
) -> None:
    # given a click on the first frame, propagated, and the page closed part-way
    video_id = open_video(page, server)
    session_id = page.get_attribute("#editor", "data-session-id")
    click_square(page, 0)
    page.click("#propagate")
    page.wait_for_function(
        "() => parseInt(document.getElementById('progress-label').textContent) > 0"
    )
    [job] = jobs(page)
    context = page.context
    page.close()
    assert job["status"] == "running"
    assert job["session_id"] == session_id

    # when the video is opened again from the gallery, which marks it (a new page of the
    # browser's, its address naming no session)
    again = context.new_page()
    again.goto(f"{server}/")
    card = again.locator(".video-card", has_text="long.mp4")
    expect(card.locator(".job-mark")).to_have_text(
        re.compile(rf"Propagating: \d+ / {FRAMES} frames")
    )
    assert again.locator(".job-mark").count() == 1
    assert open_video(again, server) == video_id

    # then it is given the job's session, shows the job's progress with the controls held for
    # it, and can cancel it
    assert again.get_attribute("#editor", "data-session-id") == session_id
    expect(again.locator("#editor")).to_have_attribute("data-job", str(job["id"]))
    expect(again.locator("#cancel")).to_be_enabled()
    assert not again.is_visible("#propagate")
    assert again.is_disabled("#add-object")
    first = progress(again)
    assert 0 < first < FRAMES
    again.wait_for_function(
        f"() => parseInt(document.getElementById('progress-label').textContent) > {first}"
    )

    # and at its end, every frame's mask, the page usable again
    again.wait_for_selector("#editor[data-propagated=done]", timeout=120_000)
    assert again.text_content("#progress-label") == f"Done: {FRAMES} frames from frame 1."
    assert again.get_attribute("#timeline", "data-mask-runs") == f"0-{FRAMES - 1}"
    assert again.text_content("#message") == ""
    expect(again.locator("#propagate")).to_be_enabled()
    assert again.is_enabled("#add-object")
    go_to(again, FRAMES - 1)
    mask_drawn(again)
    [ended] = jobs(again)
    assert {key: ended[key] for key in ("id", "status", "done", "frames")} == {
        "id": job["id"],
        "status": "done",
        "done": FRAMES,
        "frames": FRAMES,
    }


def test_a_page_that_did_not_know_of_a_job_is_refused_another_then_cancels_it(server, page) -> None:
    # given two pages of the browser's on the video, and a propagation started in the first
    video_id = open_video(page, server)
    click_square(page, 0)
    other = page.context.new_page()
    open_video(other, server, video_id)
    page.click("#propagate")
    page.wait_for_function(
        "() => parseInt(document.getElementById('progress-label').textContent) > 0"
    )
    [job] = [item for item in jobs(page) if item["status"] == "running"]

    # when the second, which has not looked since, asks for a propagation too
    started = time.monotonic()
    other.click("#propagate")

    # then it is refused with the server's reason, and follows the job that runs
    expect(other.locator("#message")).to_have_text(
        f"a propagation already runs on this work (job {job['id']}): cancel it first"
    )
    expect(other.locator("#editor")).to_have_attribute("data-job", str(job["id"]))
    assert 0 < progress(other) < FRAMES

    # and its Cancel stops the job, for both pages
    other.click("#cancel")
    other.wait_for_selector("#editor[data-propagated=cancelled]")
    page.wait_for_selector("#editor[data-propagated=cancelled]")
    [cancelled] = [item for item in jobs(page) if item["id"] == job["id"]]
    assert cancelled["status"] == "cancelled"
    assert cancelled["done"] < FRAMES
    for shown in (page, other):
        assert shown.text_content("#progress-label") == (
            f"Cancelled after {cancelled['done']} of {FRAMES} frames from frame 1."
        )
        expect(shown.locator("#propagate")).to_be_enabled()
    assert time.monotonic() - started < 30
