"""The annotator on a long video, in a real browser (Debian's Chromium) against the real server
(issue 50, the page on an hour): a video long in frames and tiny in pixels, its work kept by the
server and shown at once after a reload, the timeline's runs of masks and prompts, a jump far
away, and the masks the page holds bounded however many frames it has shown."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import av
import numpy as np
import pytest
from playwright.sync_api import expect

from segmentation.rle import rle_encode
from tests.conftest import manage, project_env, running_server
from tests.segmentation.test_annotator_browser import graphql

# 1500 frames: the page's window (4 chunks, 480 frames) is still a third of the video at most;
# the 3000 frames before took seconds more of the server's and the browser's CPU (the import, the
# steps through the video), and showed no more
WIDTH, HEIGHT, FRAMES = 64, 48, 1500
SIDE = 14  # the square's side, in pixels
END = 200  # the propagation's marked end, a frame index
FAR = 1250  # a frame far from the others, clicked on
CHUNK = 120  # annotations.js's frames per read of the store


def square_at(frame_index: int) -> tuple[int, int]:
    """The top-left corner of the square on the frame: it drifts right and back, a pixel every
    100 frames."""
    step = (frame_index // 100) % 30
    return 8 + (step if step < 15 else 30 - step), 16


def square_mask(frame_index: int) -> np.ndarray:
    x, y = square_at(frame_index)
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[y : y + SIDE, x : x + SIDE] = True
    return mask


def write_long_video(path: Path, frames: int = FRAMES) -> Path:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=24)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.options = {"crf": "10", "g": "48"}
        for index in range(frames):
            image = np.full((HEIGHT, WIDTH, 3), (40, 60, 90), np.uint8)
            image[square_mask(index)] = (240, 220, 60)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory, default_video_var):
    folder = tmp_path_factory.mktemp("long-library")
    write_long_video(folder / "long.mp4")
    var_dir = default_video_var
    with running_server(var_dir) as base_url:
        done = manage("import_videos", str(folder), env=project_env(var_dir))
        assert done.returncode == 0, done.stderr
        yield base_url, var_dir


def open_long_video(base_url: str, page) -> str:
    page.goto(f"{base_url}/")
    page.click(".video-card:has-text('long.mp4')")
    page.wait_for_selector("#editor[data-ready=true]")
    return page.get_attribute("#editor", "data-session-id")


def shown(page, frame_index: int) -> None:
    page.wait_for_selector(f"#editor[data-frame-shown='{frame_index}']")


def go_to(page, frame_index: int) -> None:
    page.fill("#goto", str(frame_index + 1))
    page.press("#goto", "Enter")
    shown(page, frame_index)


def click_square(page, frame_index: int) -> None:
    x, y = square_at(frame_index)
    box = page.locator("#overlay").bounding_box()
    centre_x, centre_y = x + SIDE / 2, y + SIDE / 2
    with page.expect_response(
        lambda r: r.url.endswith("/graphql") and "addPoints" in (r.request.post_data or "")
    ):
        page.mouse.click(
            box["x"] + centre_x * box["width"] / WIDTH, box["y"] + centre_y * box["height"] / HEIGHT
        )


COUNT_MASKED = """() => { const data = document.getElementById("overlay").getContext("2d")
    .getImageData(0, 0, overlay.width, overlay.height).data;
  let n = 0; for (let i = 3; i < data.length; i += 4) if (data[i]) n++; return n; }"""
MASK_AT_LEAST = 100  # overlay pixels: a square's mask is drawn (a point alone covers fewer)


def masked_pixels(page) -> int:
    """How many of the overlay's pixels a mask (or a point) covers."""
    return page.evaluate(COUNT_MASKED)


def mask_drawn(page) -> int:
    """Wait until the overlay shows a mask; how many pixels it covers."""
    page.wait_for_function(f"() => ({COUNT_MASKED})() >= {MASK_AT_LEAST}")
    return masked_pixels(page)


def held(page) -> dict:
    return page.evaluate("window.annotatorHeld()")


def timeline(page) -> dict:
    return {
        name: page.get_attribute("#timeline", f"data-{name}")
        for name in ("mask-runs", "masked", "prompted", "anchors")
    }


def test_the_work_of_a_long_video_shows_at_once_after_a_reload_and_the_page_holds_a_window(
    server, page
) -> None:
    base_url, _ = server
    session_id = open_long_video(base_url, page)
    # given a click on the first frame, propagated forward to a marked end, and one far away
    click_square(page, 0)
    go_to(page, END)
    page.keyboard.press("e")
    go_to(page, 0)
    page.select_option("#direction", "forward")
    page.keyboard.press("p")
    page.wait_for_selector("#editor[data-propagated=done]", timeout=60_000)
    go_to(page, FAR)
    click_square(page, FAR)
    far_mask = mask_drawn(page)
    before = timeline(page)
    assert before == {
        "mask-runs": f"0-{END},{FAR}-{FAR}",
        "masked": str(END + 2),
        "prompted": f"0,{FAR}",
        "anchors": f"0,{FAR}",
    }

    # when the page is reloaded
    page.reload()
    page.wait_for_selector("#editor[data-ready=true]")
    shown(page, FAR)

    # then the same session, its object, clicks and masks, read from the store
    assert page.get_attribute("#editor", "data-session-id") == session_id
    assert timeline(page) == before
    assert page.locator("#objects li .object-pick").all_text_contents() == [
        "Object 1 · clicked on 2 frames"
    ]
    assert masked_pixels(page) == far_mask
    assert held(page)["maskFrames"] == 1  # the far frame's, alone in its window

    # a jump back into the propagated frames shows that frame's mask at once
    go_to(page, 150)
    assert masked_pixels(page) >= MASK_AT_LEAST
    page.wait_for_function("() => window.annotatorHeld().maskFrames === 201")
    go_to(page, 750)  # no mask there
    assert masked_pixels(page) == 0

    # and stepping through many frames holds a window, never the video
    go_to(page, 0)
    for _ in range(40):
        page.keyboard.press("ArrowRight")
    shown(page, 40)
    for frame_index in range(0, FRAMES, 97):
        go_to(page, frame_index)
        counts = held(page)
        assert counts["chunks"] <= 4
        assert counts["maskFrames"] <= 4 * CHUNK
        assert counts["decodedFrames"] <= 64
    go_to(page, FAR)
    page.wait_for_function("() => window.annotatorHeld().maskFrames === 1")
    assert masked_pixels(page) == far_mask


def test_stored_masks_show_at_once_in_a_new_session_after_the_old_one_ended(server, page) -> None:
    base_url, var_dir = server
    old_session = open_long_video(base_url, page)
    owner = next(c["value"] for c in page.context.cookies() if c["name"] == "sessionid")
    # given masks stored for this browser's work on the video (object 1 on 1000-1099, object 2
    # on the last ten frames), and its session ended
    with sqlite3.connect(var_dir / "db.sqlite3") as database:
        [(work_id,)] = database.execute(
            "SELECT id FROM segmentation_work WHERE owner = ?", (owner,)
        ).fetchall()
        rows = [
            (work_id, frame, object_id, rle_encode(square_mask(frame))["counts"])
            for object_id, frames in ((1, range(1000, 1100)), (2, range(FRAMES - 10, FRAMES)))
            for frame in frames
        ]
        database.executemany(
            "INSERT INTO segmentation_workmask (work_id, frame_index, object_id, counts)"
            " VALUES (?, ?, ?, ?)",
            rows,
        )
    closed = graphql(
        base_url,
        "mutation($s: String!) { closeSession(input: {sessionId: $s}) { success } }",
        s=old_session,
    )
    assert closed == {"data": {"closeSession": {"success": True}}}

    # when the page is reloaded
    page.reload()
    page.wait_for_selector("#editor[data-ready=true]")

    # then a new session, with the stored masks on the timeline and on their frames
    new_session = page.get_attribute("#editor", "data-session-id")
    assert new_session not in (None, old_session)
    expect(page.locator("#message")).to_have_text(
        "This page's session had ended on the server; a new one is open, with your work."
    )
    assert timeline(page) == {
        "mask-runs": f"1000-1099,{FRAMES - 10}-{FRAMES - 1}",
        "masked": "110",
        "prompted": "",
        "anchors": "",
    }
    assert page.locator("#objects li .object-pick").all_text_contents() == [
        "Object 1",
        "Object 2",
    ]
    assert masked_pixels(page) == 0  # the first frame has none
    page.keyboard.press("End")
    shown(page, FRAMES - 1)
    assert masked_pixels(page) >= SIDE * SIDE
    go_to(page, 1050)
    assert masked_pixels(page) >= SIDE * SIDE
    assert held(page)["maskFrames"] == 100
