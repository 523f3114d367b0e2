"""The annotator's propagation over a range, in a real browser (Debian's Chromium) against the
real server: the person marks an end on the timeline, chooses a direction, and the propagation
covers exactly that range (issue 41); the end moves where E is pressed, a reload comes back to
the frame, the end and the direction, and the server's messages count frames as the page does
(issue 48)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.conftest import running_server
from tests.segmentation.test_annotator_browser import (
    FRAMES,
    open_default_video,
    server_annotations,
)
from tests.segmentation.test_annotator_workplace_browser import click_on_box, go_to

START, END = 5, 20  # 0-based: the clicked frame the propagation starts from, the marked end


@pytest.fixture(scope="module")
def server(default_video_var):
    with running_server(default_video_var) as base_url:
        yield base_url


def timeline(page, name: str) -> str:
    return page.get_attribute("#timeline", f"data-{name}")


def test_a_marked_end_bounds_the_propagation_to_its_range(server, page) -> None:
    # given a click on the box, and frame END marked as the end with its key
    session_id = open_default_video(server, page)
    go_to(page, END + 1)
    page.keyboard.press("e")
    expect(page.locator("#mark-end")).to_have_text(f"Clear end (frame {END + 1})")
    assert timeline(page, "end") == str(END)
    go_to(page, START + 1)
    click_on_box(page, START)
    # both ways, the end's distance bounds each side: 5 frames back stop at frame 0
    assert timeline(page, "range") == f"0-{END}"

    # when the direction is forward, and Propagate is pressed
    page.select_option("#direction", "forward")
    assert page.evaluate("document.activeElement.id") != "direction"
    assert timeline(page, "range") == f"{START}-{END}"
    page.click("#propagate")
    page.wait_for_selector("#editor[data-propagated=done]", timeout=60_000)

    # then the propagation covered exactly START..END: the page and the server have masks there only
    expect(page.locator("#progress-label")).to_have_text(
        f"Done: {END - START + 1} frames from frame {START + 1}."
    )
    assert timeline(page, "masked") == str(END - START + 1)
    frames = [frame["frame_index"] for frame in server_annotations(server, session_id)["frames"]]
    assert frames == list(range(START, END + 1))

    # the button pressed on the end's frame clears the end: forward then reaches the video's last
    # frame
    go_to(page, END + 1)
    page.click("#mark-end")
    expect(page.locator("#mark-end")).to_have_text("Mark end here")
    assert timeline(page, "end") == ""
    assert timeline(page, "range") == f"{END}-{FRAMES - 1}"
    # and the keys still answer after the select and the button
    page.keyboard.press("End")
    expect(page.locator("#frame-label")).to_have_text(f"{FRAMES} / {FRAMES}")


def test_e_on_another_frame_moves_the_end_there(server, page) -> None:
    # given the end marked on frame 31
    open_default_video(server, page)
    go_to(page, 31)
    page.keyboard.press("e")
    expect(page.locator("#mark-end")).to_have_text("Clear end (frame 31)")

    # when E is pressed on frame 51
    go_to(page, 51)
    expect(page.locator("#mark-end")).to_have_text("Move end here (now frame 31)")
    page.keyboard.press("e")

    # then the end is there, and E there clears it
    expect(page.locator("#mark-end")).to_have_text("Clear end (frame 51)")
    assert timeline(page, "end") == "50"
    page.keyboard.press("e")
    expect(page.locator("#mark-end")).to_have_text("Mark end here")
    assert timeline(page, "end") == ""


def test_a_reload_comes_back_to_the_frame_the_end_and_the_direction(server, page) -> None:
    # given the end on frame 31, backward, and frame 51 shown
    session_id = open_default_video(server, page)
    go_to(page, 31)
    page.keyboard.press("e")
    page.select_option("#direction", "backward")
    go_to(page, 51)

    # when
    page.reload()
    page.wait_for_selector("#editor[data-ready=true]")

    # then the same session, on the same frame, with the same range
    assert page.get_attribute("#editor", "data-session-id") == session_id
    expect(page.locator("#frame-label")).to_have_text(f"51 / {FRAMES}")
    assert page.get_attribute("#editor", "data-frame-shown") == "50"
    expect(page.locator("#mark-end")).to_have_text("Move end here (now frame 31)")
    assert page.input_value("#direction") == "backward"
    assert timeline(page, "end") == "30"
    assert timeline(page, "range") == "30-50"


def test_a_refused_range_is_told_in_the_pages_frame_numbers(server, page) -> None:
    # given the end on frame 71, and a click on frame 91
    open_default_video(server, page)
    go_to(page, 71)
    page.keyboard.press("e")
    go_to(page, 91)
    click_on_box(page, 90)

    # when a forward propagation is asked for from there
    page.select_option("#direction", "forward")
    page.click("#propagate")

    # then the server's refusal names the frames as the page does
    expect(page.locator("#message")).to_have_text(
        "end frame 71 is before start frame 91: a forward propagation ends at or after its start"
    )
    assert page.text_content("#frame-label") == f"91 / {FRAMES}"
    assert page.text_content("#mark-end") == "Move end here (now frame 71)"


@pytest.mark.parametrize(
    ("server_says", "page_says"),
    [
        ("start frame index 150 is outside the video's frames 0..143",
         "start frame 151 is outside the video's frames 1..144"),
        ("frame 3, object 2: its prompt of 30 points would cost the engine 129",
         "frame 4, object 2: its prompt of 30 points would cost the engine 129"),
        ("the import stopped after 2 of the file's 12 frames: its frames up to 12 were imported"
         " and are kept, those from 24 on were not",
         "the import stopped after 2 of the file's 12 frames: its frames up to 13 were imported"
         " and are kept, those from 25 on were not"),
        # a file's own field keeps the value the file holds
        ("frames[0].frame_index must be within 0..143, got 999",
         "frames[0].frame_index must be within 0..143, got 999"),
    ],
)  # fmt: skip
def test_the_server_s_other_frame_numbers_read_as_the_page_counts(
    server, page, server_says: str, page_says: str
) -> None:
    page.goto(f"{server}/annotate/")
    rewritten = page.evaluate(
        """async (text) =>
            (await import("/static/segmentation/frame_numbers.js")).pageFrames(text)""",
        server_says,
    )
    assert rewritten == page_says
