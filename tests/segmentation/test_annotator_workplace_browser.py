"""The annotator as a place to work, in a real browser (Debian's Chromium) against the real
server: its keys answer whatever control was used last, its work survives a reload, and its
masks stay visible on objects of their own colour (issue 41), in colours apart from each other
that are the same in another session, with click marks that stand out from them (issue 48)."""

from __future__ import annotations

import colorsys
import io
import itertools
import json
import math
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
import requests
from PIL import Image
from playwright.sync_api import expect

from segmentation.demo_video import demo_masks
from segmentation.rle import rle_decode
from tests.conftest import running_server
from tests.segmentation.test_annotator_browser import (
    FIRST_COLOUR,
    FRAMES,
    click_at,
    farthest,
    graphql,
    is_add_points,
    open_default_video,
    server_annotations,
)

ANCHORS = (5, 40)  # the frames the keys test clicks on, 0-based


@pytest.fixture(scope="module")
def server(default_video_var):
    with running_server(default_video_var) as base_url:
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

    for selector in ("#export-json", "#export-zip", "#export-coco", "#export-yolo"):
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


OVERLAY_DIGEST = """() => {
    const data = document.getElementById("overlay").getContext("2d")
        .getImageData(0, 0, overlay.width, overlay.height).data;
    let drawn = 0, digest = 7;
    for (let i = 0; i < data.length; i++) {
        digest = (Math.imul(digest, 31) + data[i]) >>> 0;
        if (i % 4 === 3 && data[i]) drawn++;
    }
    return [drawn, digest];
}"""


def overlay_settled(page) -> list[int]:
    """The overlay's digest once two reads 0.1 s apart agree: a mask is drawn a moment after its
    answer comes (and again if its object's colour changes with what lies under it)."""
    last = page.evaluate(OVERLAY_DIGEST)
    for _ in range(50):
        page.wait_for_timeout(100)
        now = page.evaluate(OVERLAY_DIGEST)
        if now == last:
            return now
        last = now
    raise AssertionError(f"the overlay kept changing for 5 s: {last}")


def object_labels(page) -> list[str]:
    return page.locator("#objects li .object-pick").all_text_contents()


def address_session(page) -> str:
    return parse_qs(urlparse(page.url).query)["session"][0]


def test_a_reload_takes_the_session_up_again_with_its_objects_clicks_and_masks(
    server, page
) -> None:
    # given two objects: 2 clicked on two frames, 1 on one, and the first frame shown
    session_id = open_default_video(server, page)
    assert address_session(page) == session_id
    page.click("#add-object")
    click_on_box(page, 0)
    go_to(page, 11)
    click_on_box(page, 10)
    page.click("#objects li:first-child .object-pick")
    x, y = farthest(demo_masks(10)["ball"], (-100, -100))
    with page.expect_response(is_add_points):
        click_at(page, x, y)
    go_to(page, 1)
    page.wait_for_selector("#editor[data-frame-shown='0']")
    labels = object_labels(page)
    overlay = overlay_settled(page)
    masks = server_annotations(server, session_id)

    # when
    page.reload()
    page.wait_for_selector("#editor[data-ready=true]")
    page.wait_for_selector("#editor[data-frame-shown='0']")

    # then the same session, objects, clicks and masks, the same overlay pixel for pixel
    assert page.get_attribute("#editor", "data-session-id") == session_id
    assert address_session(page) == session_id
    assert labels == ["Object 1 · clicked on 1 frame", "Object 2 · clicked on 2 frames"]
    assert object_labels(page) == labels
    assert page.text_content("#objects li.selected .object-pick") == labels[0]
    assert overlay_settled(page) == overlay
    assert overlay[0] > 1000
    assert server_annotations(server, session_id) == masks
    assert [frame["frame_index"] for frame in masks["frames"]] == [0, 10]
    assert page.get_attribute("#timeline", "data-anchors") == "10"
    assert page.is_enabled("#propagate")
    assert page.text_content("#message") == ""

    # and the work goes on in it: a click on the ball of frame 1 for object 1
    x, y = farthest(demo_masks(0)["ball"], (-100, -100))
    with page.expect_response(is_add_points):
        click_at(page, x, y)
    objects = server_annotations(server, session_id)["frames"][0]["objects"]
    assert [item["object_id"] for item in objects] == [1, 2]
    assert object_labels(page) == ["Object 1 · clicked on 2 frames", labels[1]]


ENDED = "This page's session had ended on the server; a new one is open, with your work."


def test_a_session_the_server_no_longer_has_is_said_and_replaced(server, page) -> None:
    page.goto(f"{server}/annotate/?session=no-such-session")
    page.wait_for_selector("#editor[data-ready=true]")

    assert page.text_content("#message") == ENDED
    session_id = page.get_attribute("#editor", "data-session-id")
    assert session_id not in (None, "no-such-session")
    assert address_session(page) == session_id
    assert object_labels(page) == ["Object 1"]
    click_on_box(page, 0)
    frames = server_annotations(server, session_id)["frames"]
    assert [frame["frame_index"] for frame in frames] == [0]


def test_a_session_ended_before_a_reload_is_replaced_by_one_with_the_stored_work(
    server, page
) -> None:
    old_session = open_default_video(server, page)
    click_on_box(page, 0)
    closed = graphql(
        server,
        "mutation($s: String!) { closeSession(input: {sessionId: $s}) { success } }",
        s=old_session,
    )
    assert closed == {"data": {"closeSession": {"success": True}}}

    page.reload()
    page.wait_for_selector("#editor[data-ready=true]")

    # the new session starts with the work the server kept: the click and its mask
    assert page.text_content("#message") == ENDED
    assert object_labels(page) == ["Object 1 · clicked on 1 frame"]
    new_session = page.get_attribute("#editor", "data-session-id")
    assert new_session != old_session
    objects = server_annotations(server, new_session)["frames"][0]["objects"]
    assert [item["object_id"] for item in objects] == [1]
    assert page.get_attribute("#timeline", "data-mask-runs") == "0-0"
    assert page.is_enabled("#propagate")


HUE_APART = 90  # degrees between an object's fill and the mean colour under its mask, at least
DARK_OUTLINE, LIGHT_OUTLINE = [16, 20, 24], [255, 255, 255]  # overlay.js
FILL_ALPHA = 150


def rgb_of(hex_colour: str) -> list[int]:
    return [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]


def hue_distance(a: list[int], b: list[int]) -> float:
    hue_a = colorsys.rgb_to_hsv(*(c / 255 for c in a))[0] * 360
    hue_b = colorsys.rgb_to_hsv(*(c / 255 for c in b))[0] * 360
    apart = abs(hue_a - hue_b)
    return min(apart, 360 - apart)


def interior(mask: np.ndarray) -> np.ndarray:
    """The mask's pixels whose four neighbours are in it too (the frame's edge counts as out)."""
    padded = np.pad(mask, 1)
    return mask & padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]


def overlay_pixels(page, points: list[tuple[int, int]]) -> list[list[int]]:
    return page.evaluate(
        """(points) => {
            const data = document.getElementById("overlay").getContext("2d")
                .getImageData(0, 0, overlay.width, overlay.height).data;
            return points.map(([x, y]) => Array.from(data.slice((y * overlay.width + x) * 4,
                (y * overlay.width + x) * 4 + 4)));
        }""",
        points,
    )


def test_a_mask_on_an_object_of_its_own_colour_is_drawn_apart_from_it(server, page) -> None:
    # given object 1 (red in the palette), clicked on the red ball
    session_id = open_default_video(server, page)
    click = farthest(demo_masks(0)["ball"], (-100, -100))
    with page.expect_response(is_add_points):
        click_at(page, *click)
    page.wait_for_selector("#objects li[data-under]")
    page.shot("red-ball")

    # then its colour is the palette's, far in hue from the ball's under the mask
    item = page.locator("#objects li[data-object-id='1']")
    colour, under = (
        rgb_of(item.get_attribute("data-colour")),
        rgb_of(item.get_attribute("data-under")),
    )
    mask = rle_decode(server_annotations(server, session_id)["frames"][0]["objects"][0]["mask"])
    frame = requests.get(f"{server}/frames/0.jpg?video=gallery/default.mp4", timeout=10)
    pixels = np.asarray(Image.open(io.BytesIO(frame.content)).convert("RGB"))
    np.testing.assert_allclose(under, pixels[mask].mean(axis=0), atol=3)
    assert hue_distance(under, FIRST_COLOUR) < 20  # the ball is red: red would hide on it
    assert hue_distance(colour, under) > HUE_APART
    assert colour != FIRST_COLOUR
    swatch = page.eval_on_selector(
        "#objects li .swatch", "s => getComputedStyle(s).backgroundColor"
    )
    assert swatch == f"rgb({colour[0]}, {colour[1]}, {colour[2]})"

    # and its mask is drawn in it inside a 2 px outline that contrasts with it
    luminance = 0.2126 * colour[0] + 0.7152 * colour[1] + 0.0722 * colour[2]
    outline = DARK_OUTLINE if luminance > 140 else LIGHT_OUTLINE
    first = interior(mask)
    ring1, ring2, fill = mask & ~first, first & ~interior(first), interior(first)
    assert ring1.sum() > 100
    ys, xs = np.mgrid[: mask.shape[0], : mask.shape[1]]
    away = (xs - click[0]) ** 2 + (ys - click[1]) ** 2 > 20**2  # not under the clicked point
    for ring in (ring1, ring2):
        points = [(int(x), int(y)) for y, x in zip(*np.nonzero(ring & away), strict=True)]
        assert overlay_pixels(page, points) == [[*outline, 255]] * len(points)
    points = [(int(x), int(y)) for y, x in zip(*np.nonzero(fill & away), strict=True)][::50]
    # (read back through the canvas's premultiplied alpha, as the browser stores it)
    stored = [round(round(c * FILL_ALPHA / 255) * 255 / FILL_ALPHA) for c in colour]
    assert overlay_pixels(page, points) == [[*stored, FILL_ALPHA]] * len(points)
    outside = farthest(~mask, click)
    assert overlay_pixels(page, [outside]) == [[0, 0, 0, 0]]

    # and the colour stays the object's on the next frame's mask too
    go_to(page, 2)
    x, y = farthest(demo_masks(1)["ball"], (-100, -100))
    with page.expect_response(is_add_points):
        click_at(page, x, y)
    assert rgb_of(item.get_attribute("data-colour")) == colour


COLOURS_APART = 90  # RGB distance between any two objects' colours, at least (overlay.js)
FAR_ENOUGH = 120  # between an object's fill and the mean colour under its mask (overlay.js)
MARK_STANDS_OUT = 100  # luminance between a click's mark and its object's fill, at least
SCENE = 30  # a frame of the default video with the ball, the box and the star


def luminance(colour: list[int]) -> float:
    return 0.2126 * colour[0] + 0.7152 * colour[1] + 0.0722 * colour[2]


def object_colours(page) -> dict[int, list[int]]:
    return {
        int(item.get_attribute("data-object-id")): rgb_of(item.get_attribute("data-colour"))
        for item in page.locator("#objects li").all()
    }


def assert_apart(colours: dict[int, list[int]]) -> None:
    for (a, colour_a), (b, colour_b) in itertools.combinations(colours.items(), 2):
        assert math.dist(colour_a, colour_b) >= COLOURS_APART, (a, colour_a, b, colour_b)


def click_on(page, name: str) -> tuple[int, int]:
    x, y = farthest(demo_masks(SCENE)[name], (-100, -100))
    with page.expect_response(is_add_points):
        click_at(page, x, y)
    return x, y


def test_objects_colours_stay_apart_and_are_the_same_in_another_session(
    server, page, tmp_path
) -> None:
    # given object 1 clicked on the red ball, then object 2 added and clicked on the blue box
    session_id = open_default_video(server, page)
    go_to(page, SCENE + 1)
    clicks = {1: click_on(page, "ball")}
    page.click("#add-object")
    assert_apart(object_colours(page))
    clicks[2] = click_on(page, "box")

    # when object 3 is added, and clicked on the yellow star
    page.click("#add-object")
    assert_apart(object_colours(page))
    clicks[3] = click_on(page, "star")
    page.wait_for_function(
        "() => document.querySelectorAll('#objects li[data-under]').length === 3"
    )

    # then the three colours are apart, and each is far from what lies under its mask
    colours = object_colours(page)
    assert_apart(colours)
    for object_id, colour in colours.items():
        item = page.locator(f"#objects li[data-object-id='{object_id}']")
        under = rgb_of(item.get_attribute("data-under"))
        assert math.dist(colour, under) >= FAR_ENOUGH, (object_id, colour, under)
    # and each click's mark stands out from its object's fill
    marks = overlay_pixels(page, list(clicks.values()))
    for (object_id, colour), mark in zip(colours.items(), marks, strict=True):
        assert abs(luminance(mark[:3]) - luminance(colour)) >= MARK_STANDS_OUT, (object_id, mark)

    # and in another session, the same objects imported get the same colours
    work = tmp_path / "work.json"
    work.write_text(json.dumps(server_annotations(server, session_id)))
    other = open_default_video(server, page)
    assert other != session_id
    page.set_input_files("#import-file", str(work))
    expect(page.locator("#message")).to_have_text(
        "Imported the masks and clicks of 1 frame from work.json."
    )
    go_to(page, SCENE + 1)
    page.wait_for_function(
        "() => document.querySelectorAll('#objects li[data-under]').length === 3"
    )
    assert object_colours(page) == colours
