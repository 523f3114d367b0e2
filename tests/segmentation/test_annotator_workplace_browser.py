"""The annotator as a place to work, in a real browser (Debian's Chromium) against the real
server: its keys answer whatever control was used last, its work survives a reload, and its
masks stay visible on objects of their own colour (issue 41)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from segmentation.demo_video import demo_masks
from tests.conftest import running_server
from tests.segmentation.test_annotator_browser import (
    FRAMES,
    click_at,
    farthest,
    is_add_points,
    open_default_video,
)

ANCHORS = (5, 40)  # the frames the keys test clicks on, 0-based


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("annotator-work-var")) as base_url:
        yield base_url


def shown(page, frame_number: int) -> None:
    """Wait until frame ``frame_number`` (1-based, as the page counts) is the one shown."""
    expect(page.locator("#frame-label")).to_have_text(f"{frame_number} / {FRAMES}")


def go_to(page, frame_number: int) -> None:
    page.fill("#goto", str(frame_number))
    page.press("#goto", "Enter")
    shown(page, frame_number)


def click_on_box(page, frame_index: int) -> None:
    x, y = farthest(demo_masks(frame_index)["box"], (-100, -100))
    with page.expect_response(is_add_points):
        click_at(page, x, y)


def selected_anchors(page) -> list[int]:
    anchors = page.get_attribute("#timeline", "data-anchors")
    return [int(frame) for frame in anchors.split(",")] if anchors else []


def keys_answer(page, downloads: list) -> None:
    """Every key of the annotator, pressed wherever the focus is, with its exact effect; the
    focused control is not used again by any of them."""
    objects = page.locator("#objects li").count()
    downloaded = len(downloads)

    page.keyboard.press("End")
    shown(page, FRAMES)
    page.keyboard.press("Home")
    shown(page, 1)
    page.keyboard.press("ArrowRight")
    shown(page, 2)
    page.keyboard.press("ArrowLeft")
    shown(page, 1)

    anchors = selected_anchors(page)
    page.keyboard.press("]")
    shown(page, anchors[0] + 1 if anchors else 1)
    page.keyboard.press("End")
    shown(page, FRAMES)
    page.keyboard.press("[")
    shown(page, anchors[-1] + 1 if anchors else FRAMES)

    page.keyboard.press("g")
    assert page.evaluate("document.activeElement.id") == "goto"
    page.keyboard.type("44")
    page.keyboard.press("Enter")
    shown(page, 44)
    assert page.evaluate("document.activeElement.id") != "goto"
    assert page.input_value("#goto") == ""

    page.keyboard.press(" ")
    expect(page.locator("#play")).to_have_text("Pause")
    page.keyboard.press(" ")
    expect(page.locator("#play")).to_have_text("Play")

    if page.is_enabled("#propagate"):
        page.keyboard.press("P")
        expect(page.locator("#cancel")).to_be_visible()
        page.click("#cancel")
        page.wait_for_selector("#editor[data-propagated=cancelled]")
    else:
        page.keyboard.press("P")
        expect(page.locator("#cancel")).to_be_hidden()

    assert page.locator("#objects li").count() == objects
    assert len(downloads) == downloaded


def use_then_focus(page, selector: str) -> None:
    """Click the control, then focus it as well: the keys must answer even if it kept focus."""
    page.click(selector)
    page.evaluate(
        "(selector) => { const control = document.querySelector(selector); "
        "if (control && !control.hidden && !control.disabled) control.focus(); }",
        selector,
    )


def test_every_key_answers_after_every_control(server, page) -> None:
    open_default_video(server, page)
    downloads = []
    page.on("download", lambda download: downloads.append(download))
    for frame_index in ANCHORS:
        go_to(page, frame_index + 1)
        click_on_box(page, frame_index)
    assert selected_anchors(page) == list(ANCHORS)
    keys_answer(page, downloads)

    # the scrubber, clicked in its middle and kept focused
    box = page.locator("#scrubber").bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    assert page.evaluate("document.activeElement.id") == "scrubber"
    keys_answer(page, downloads)

    # play, used twice (play, pause)
    page.click("#play")
    use_then_focus(page, "#play")
    expect(page.locator("#play")).to_have_text("Play")
    keys_answer(page, downloads)

    # the tap mode, there and back
    page.click("#mode")
    use_then_focus(page, "#mode")
    expect(page.locator("#mode")).to_have_text("Taps mark: object")
    keys_answer(page, downloads)

    for selector in ("#export-json", "#export-zip"):
        with page.expect_download():
            use_then_focus(page, selector)
        keys_answer(page, downloads)

    # propagate, then cancel by its button
    use_then_focus(page, "#propagate")
    use_then_focus(page, "#cancel")
    page.wait_for_selector("#editor[data-propagated=cancelled]")
    keys_answer(page, downloads)

    use_then_focus(page, "#objects li .object-pick")
    assert selected_anchors(page) == list(ANCHORS)
    keys_answer(page, downloads)

    use_then_focus(page, "#add-object")
    assert page.locator("#objects li").count() == 2
    assert selected_anchors(page) == []
    keys_answer(page, downloads)

    use_then_focus(page, "#objects li:nth-child(2) .object-remove")
    assert page.locator("#objects li").count() == 1
    assert selected_anchors(page) == list(ANCHORS)
    keys_answer(page, downloads)

    go_to(page, ANCHORS[1] + 1)
    use_then_focus(page, "#clear-frame")
    assert selected_anchors(page) == [ANCHORS[0]]
    keys_answer(page, downloads)

    use_then_focus(page, "#clear-all")
    assert selected_anchors(page) == []
    keys_answer(page, downloads)

    # in the go-to box, typing stays typing
    page.focus("#goto")
    page.keyboard.type("12")
    assert page.input_value("#goto") == "12"
    page.keyboard.press("Escape")
    assert page.input_value("#goto") == ""
