"""Work given back through the annotator's annotation files, in a real browser (Debian's Chromium)
against the real server: an export imported into a new session propagates to the same masks,
imported masks survive a session the server lost, and *Start again* starts from the tab's last
export (issue 41)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from playwright.sync_api import expect

from segmentation.demo_video import demo_masks
from segmentation.rle import rle_decode, rle_encode
from tests.conftest import running_server
from tests.segmentation.test_annotator_box_browser import MIN_IOU, drag, iou, overlay_rect
from tests.segmentation.test_annotator_browser import (
    WIDTH,
    click_at,
    farthest,
    graphql,
    is_add_points,
    open_default_video,
    server_annotations,
)
from tests.segmentation.test_annotator_workplace_browser import go_to

OTHER_FRAME = 30  # 0-based: the second frame the round trip clicks on
# 0-based: the marked end of the propagations from frame 0, five frames past the last clicked on
# (the whole video's 144 frames took 11 s of two loaded cores a propagation, and show no more;
# 40 took a second more of them over the module's three propagations)
END = OTHER_FRAME + 5
VIDEO = "gallery/default.mp4"
ENDED = "This page's session had ended on the server; a new one is open, with your work."


@pytest.fixture(scope="module")
def server(default_video_var):
    with running_server(default_video_var) as base_url:
        yield base_url


def close_session(server: str, session_id: str) -> None:
    closed = graphql(
        server,
        "mutation($s: String!) { closeSession(input: {sessionId: $s}) { success } }",
        s=session_id,
    )
    assert closed == {"data": {"closeSession": {"success": True}}}


def mark_end(page, frame_index: int) -> None:
    """Mark the propagations' end on the frame with its key, then show frame 0 again."""
    go_to(page, frame_index + 1)
    page.keyboard.press("e")
    expect(page.locator("#mark-end")).to_have_text(f"Clear end (frame {frame_index + 1})")
    go_to(page, 1)


def propagate(page) -> None:
    """Propagate from frame 0 to the marked end ``END``."""
    page.click("#propagate")
    page.wait_for_selector("#editor[data-propagated=done]", timeout=60_000)
    expect(page.locator("#progress-label")).to_have_text(f"Done: {END + 1} frames from frame 1.")


def click_on(page, frame_index: int, name: str) -> None:
    x, y = farthest(demo_masks(frame_index)[name], (-100, -100))
    with page.expect_response(is_add_points):
        click_at(page, x, y)


def box_on(page, frame_index: int, name: str) -> None:
    """Drag a box 8 video pixels around the object ``name`` on the frame shown."""
    rect = overlay_rect(page)
    scale = rect["width"] / WIDTH
    ys, xs = np.nonzero(demo_masks(frame_index)[name])
    with page.expect_response(is_add_points):
        drag(
            page,
            (rect["left"] + (xs.min() - 8) * scale, rect["top"] + (ys.min() - 8) * scale),
            (rect["left"] + (xs.max() + 8) * scale, rect["top"] + (ys.max() + 8) * scale),
        )


def same_work(a: dict, b: dict) -> bool:
    """Equal annotation files: the same masks and labels exactly, the same clicks to a millionth
    of the frame (the page and the server normalize a pixel in float steps of their own)."""

    def points(data: dict) -> list[float]:
        clicks = [item.pop("points", []) for frame in data["frames"] for item in frame["objects"]]
        return [value for points in clicks for point in points for value in point]

    a, b = json.loads(json.dumps(a)), json.loads(json.dumps(b))
    points_a, points_b = points(a), points(b)
    return a == b and points_a == pytest.approx(points_b, abs=1e-6)


def export_file(page, path: Path) -> dict:
    with page.expect_download() as download:
        page.click("#export-json")
    download.value.save_as(path)
    return json.loads(path.read_text())


def test_an_export_imported_into_a_new_session_propagates_to_the_same_masks(
    server, page, tmp_path: Path
) -> None:
    # given two objects with prompts on two frames (object 2 a box, then a click), exported and
    # propagated
    first = open_default_video(server, page)
    click_on(page, 0, "ball")
    page.click("#add-object")
    box_on(page, 0, "box")
    go_to(page, OTHER_FRAME + 1)
    click_on(page, OTHER_FRAME, "box")
    page.click("#objects li:first-child .object-pick")
    click_on(page, OTHER_FRAME, "ball")
    go_to(page, 1)
    # exported before the propagation: a propagated export would make every frame's mask a
    # prompt of the new session, which the first session did not have
    exported = export_file(page, tmp_path / "default-annotations.json")
    assert same_work(exported, server_annotations(server, first))
    clicked = {
        (frame["frame_index"], item["object_id"]): item["labels"]
        for frame in exported["frames"]
        for item in frame["objects"]
    }
    assert clicked == {(0, 1): [1], (0, 2): [2, 3], (OTHER_FRAME, 1): [1], (OTHER_FRAME, 2): [1]}
    mark_end(page, END)
    propagate(page)
    assert len(server_annotations(server, first)["frames"]) == END + 1

    # when the video is opened afresh (a new session) and the file imported there
    video_id = parse_qs(urlparse(page.url).query)["video"][0]
    page.goto(f"{server}/annotate/?video={video_id}")
    page.wait_for_selector("#editor[data-ready=true]")
    second = page.get_attribute("#editor", "data-session-id")
    assert second != first
    page.set_input_files("#import-file", str(tmp_path / "default-annotations.json"))
    expect(page.locator("#message")).to_have_text(
        "Imported the masks and clicks of 2 frames from default-annotations.json."
    )
    assert same_work(server_annotations(server, second), exported)

    # then a propagation from the same frame to the same end gives the first session's masks,
    # exactly
    mark_end(page, END)
    propagate(page)
    assert server_annotations(server, second) == server_annotations(server, first)
    assert page.get_attribute("#timeline", "data-masked") == str(END + 1)


def given_file(path: Path) -> dict:
    """An annotation file with one mask and no clicks: the box object on frame 0."""
    data = {
        "video": VIDEO,
        "frames": [
            {
                "frame_index": 0,
                "objects": [{"object_id": 1, "mask": rle_encode(demo_masks(0)["box"])}],
            }
        ],
    }
    path.write_text(json.dumps(data))
    return data


def test_imported_masks_are_given_to_a_session_reopened_after_it_ended(
    server, page, tmp_path: Path
) -> None:
    # given a masks-only file imported, the propagations' end marked, then the session lost by
    # the server
    first = open_default_video(server, page)
    given = given_file(tmp_path / "given.json")
    page.set_input_files("#import-file", str(tmp_path / "given.json"))
    expect(page.locator("#message")).to_have_text(
        "Imported the masks and clicks of 1 frame from given.json."
    )
    mark_end(page, END)
    close_session(server, first)

    # when the person propagates
    propagate(page)

    # then the page opened a new session, which has the imported mask from the server's store
    # as its prompt, and propagated it
    assert page.text_content("#message") == (
        "The session had ended on the server; a new one is open, with your work."
    )
    second = page.get_attribute("#editor", "data-session-id")
    assert second != first
    assert page.get_attribute("#timeline", "data-prompted") == "0"
    assert given["frames"][0]["frame_index"] == 0
    frames = server_annotations(server, second)["frames"]
    assert [frame["frame_index"] for frame in frames] == list(range(END + 1))
    # the engine redoes the prompt's frame from the mask: the box object still
    assert iou(rle_decode(frames[0]["objects"][0]["mask"]), demo_masks(0)["box"]) >= MIN_IOU
    followed = [frame["objects"][0]["mask"] for frame in frames[1:]]
    assert [rle_decode(mask).any() for mask in followed] == [True] * END


def test_clear_frame_forgets_an_imported_mask_as_it_forgets_clicks(
    server, page, tmp_path: Path
) -> None:
    # given a masks-only file imported: its mask is the frame's prompt
    session_id = open_default_video(server, page)
    given_file(tmp_path / "given.json")
    page.set_input_files("#import-file", str(tmp_path / "given.json"))
    expect(page.locator("#message")).to_have_text(
        "Imported the masks and clicks of 1 frame from given.json."
    )
    expect(page.locator("#propagate")).to_be_enabled()

    # when the person clears the frame
    page.click("#clear-frame")

    # then the mask is gone from the page and the session, and nothing is left to propagate
    expect(page.locator("#timeline")).to_have_attribute("data-masked", "0")
    expect(page.locator("#propagate")).to_be_disabled()
    assert server_annotations(server, session_id)["frames"] == []
