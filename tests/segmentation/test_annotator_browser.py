"""The annotator pages in a real browser (Debian's Chromium) against the real server: the gallery,
uploads, clicks and their overlay, propagation with cancel, playback, export and import, the
session's keep-alive, and the page's own RLE decoder."""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest
import requests
from PIL import Image
from playwright.sync_api import expect
from pycocotools import mask as coco_mask

from segmentation.demo_video import demo_masks
from segmentation.evaluation.clicks import first_click, next_click
from segmentation.rle import rle_decode, rle_encode
from tests.conftest import manage, project_env, running_server
from tests.segmentation.synthetic import make_video, write_mp4

WIDTH, HEIGHT, FRAMES = 854, 480, 144  # the drawn default video
FIRST_COLOUR = [255, 64, 64]  # object 1's colour in overlay.js
FILL_ALPHA = 150


def stored(colour: list[int]) -> list[int]:
    """A colour as a canvas reads it back at FILL_ALPHA: it keeps colours premultiplied by
    their alpha, in whole numbers."""
    return [round(round(c * FILL_ALPHA / 255) * 255 / FILL_ALPHA) for c in colour]


MAX_UPLOAD_MB = 1
PING = "query Ping"
CORRECTED = 100  # the frame the correction round clicks on


@pytest.fixture(scope="module")
def server(default_video_var):
    with running_server(default_video_var, MAX_UPLOAD_MB=str(MAX_UPLOAD_MB)) as base_url:
        yield base_url


def open_default_video(server: str, page) -> str:
    """Gallery, then the default video's card; the session's ID once the editor is ready."""
    page.goto(f"{server}/")
    page.wait_for_selector(".video-card")
    page.shot("gallery")
    page.click(".video-card:has(.badge)")
    page.wait_for_selector("#editor[data-ready=true]")
    return page.get_attribute("#editor", "data-session-id")


def click_at(page, x: float, y: float, button: str = "left") -> None:
    """Click the frame at video pixel (x, y)."""
    box = page.locator("#overlay").bounding_box()
    page.mouse.click(
        box["x"] + (x + 0.5) * box["width"] / WIDTH,
        box["y"] + (y + 0.5) * box["height"] / HEIGHT,
        button=button,
    )


def overlay_pixel(page, x: int, y: int) -> list[int]:
    return page.evaluate(
        """([x, y]) => Array.from(
            document.getElementById("overlay").getContext("2d").getImageData(x, y, 1, 1).data)""",
        [x, y],
    )


def graphql(server: str, query: str, **variables: object) -> dict:
    answer = requests.post(
        f"{server}/graphql", json={"query": query, "variables": variables}, timeout=10
    )
    return answer.json()


def server_annotations(server: str, session_id: str) -> dict:
    response = requests.get(f"{server}/annotations/{session_id}.json", timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def farthest(region: np.ndarray, away_from: tuple[int, int]) -> tuple[int, int]:
    """(x, y) of the region's pixel deepest inside it, at least 25 px from ``away_from``."""
    padded = np.pad(region, 1).astype(np.uint8)
    depth = cv2.distanceTransform(padded, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
    ys, xs = np.mgrid[: region.shape[0], : region.shape[1]]
    depth[(xs - away_from[0]) ** 2 + (ys - away_from[1]) ** 2 < 25**2] = 0
    y, x = np.unravel_index(np.argmax(depth), depth.shape)
    assert depth[y, x] >= 3, "no pixel deep enough inside the region"
    return int(x), int(y)


def test_click_propagate_cancel_play_export_import(server, page, tmp_path: Path) -> None:
    # the page asks what answers its session once it has one (with workers, each its own)
    with page.expect_response(lambda response: response.url.endswith("/engine")) as named:
        session_id = open_default_video(server, page)
    assert named.value.url == f"{server}/sessions/{session_id}/engine"
    assert page.text_content("#video-name") == "default.mp4"
    assert page.text_content("#frame-label") == f"1 / {FRAMES}"
    assert page.text_content("#engine") == "Engine: classic: no weights, CPU"
    assert page.get_attribute("#switch-engine", "href") == "/docs/engines.md"
    page.shot("editor")

    # a click on the blue box of frame 0 gives a mask, drawn where the server's mask is (its
    # answer awaited: the click's own disc, drawn at once, has edge pixels of the fill's alpha)
    click = (256, 216)
    with page.expect_response(is_add_points):
        click_at(page, *click)
    page.wait_for_function("() => !document.getElementById('propagate').disabled")
    page.wait_for_function(
        f"""() => document.getElementById("overlay").getContext("2d")
            .getImageData(0, 0, {WIDTH}, {HEIGHT}).data
            .some((v, i) => i % 4 === 3 && v === {FILL_ALPHA})"""
    )
    page.shot("clicked")
    frames = server_annotations(server, session_id)["frames"]
    assert [frame["frame_index"] for frame in frames] == [0]
    assert [item["object_id"] for item in frames[0]["objects"]] == [1]
    mask = rle_decode(frames[0]["objects"][0]["mask"])
    inside, outside = farthest(mask, click), farthest(~mask, click)
    assert overlay_pixel(page, *inside) == [*stored(FIRST_COLOUR), FILL_ALPHA]
    assert overlay_pixel(page, *outside) == [0, 0, 0, 0]
    assert page.text_content("#objects li .object-pick") == "Object 1 · clicked on 1 frame"

    # propagation, cancelled part-way
    page.click("#propagate")
    page.wait_for_function(
        "() => parseInt(document.getElementById('progress-label').textContent) >= 3"
    )
    page.click("#cancel")
    page.wait_for_selector("#editor[data-propagated=cancelled]")
    page.shot("cancelled")
    cancelled = re.fullmatch(
        rf"Cancelled after (\d+) of {FRAMES} frames from frame 1\.",
        page.text_content("#progress-label"),
    )
    assert cancelled is not None
    assert 3 <= int(cancelled.group(1)) < FRAMES
    assert page.is_visible("#propagate")
    assert not page.is_visible("#cancel")

    # propagation to the end
    page.click("#propagate")
    page.wait_for_selector("#editor[data-propagated=done]", timeout=60_000)
    assert page.text_content("#progress-label") == f"Done: {FRAMES} frames from frame 1."
    page.shot("propagated")

    # playback shows the frames with their masks
    page.click("#play")
    page.wait_for_function(
        "() => Number(document.getElementById('editor').dataset.frameShown) >= 12"
    )
    page.click("#play")  # pause
    page.shot("played")
    shown = int(page.get_attribute("#editor", "data-frame-shown"))
    masks_there = {
        frame["frame_index"]: frame for frame in server_annotations(server, session_id)["frames"]
    }
    assert shown in masks_there
    mask = rle_decode(masks_there[shown]["objects"][0]["mask"])
    page.wait_for_function(
        f"() => document.getElementById('frame-label').textContent === '{shown + 1} / {FRAMES}'"
    )
    assert overlay_pixel(page, *farthest(mask, (-100, -100))) == [*stored(FIRST_COLOUR), FILL_ALPHA]

    # export: the page's annotations are the session's
    with page.expect_download() as download:
        page.click("#export-json")
    assert download.value.suggested_filename == "default-annotations.json"
    exported_file = tmp_path / "default-annotations.json"
    download.value.save_as(exported_file)
    exported = json.loads(exported_file.read_text())
    assert exported == server_annotations(server, session_id)
    assert len(exported["frames"]) == FRAMES

    with page.expect_download() as download:
        page.click("#export-zip")
    assert download.value.suggested_filename == "default-masks.zip"
    archive = zipfile.ZipFile(io.BytesIO(Path(download.value.path()).read_bytes()))
    assert archive.namelist() == [f"default/{i:05d}.png" for i in range(FRAMES)]
    for frame in exported["frames"][::36]:
        labels = np.asarray(Image.open(archive.open(f"default/{frame['frame_index']:05d}.png")))
        np.testing.assert_array_equal(
            labels, rle_decode(frame["objects"][0]["mask"]).astype(np.uint8)
        )
    # the formats other tools read, converted from the same annotations by the server
    with page.expect_download() as download:
        page.click("#export-coco")
    assert download.value.suggested_filename == "default-coco.json"
    coco = json.loads(Path(download.value.path()).read_text())
    assert (len(coco["images"]), coco["categories"][0]["name"]) == (FRAMES, "object_1")
    with page.expect_download() as download:
        page.click("#export-yolo")
    assert download.value.suggested_filename == "default-yolo.zip"
    archive = zipfile.ZipFile(io.BytesIO(Path(download.value.path()).read_bytes()))
    assert archive.read("classes.txt") == b"object_1\n"

    # clear all, then import the export back
    page.click("#clear-all")
    page.wait_for_function(
        "() => document.getElementById('message').textContent.includes('cleared')"
    )
    assert server_annotations(server, session_id)["frames"] == []
    assert overlay_pixel(page, *inside) == [0, 0, 0, 0]
    page.set_input_files("#import-file", str(exported_file))
    page.wait_for_function(
        "() => document.getElementById('message').textContent.startsWith('Imported')"
    )
    assert page.text_content("#message") == (
        f"Imported the masks and clicks of {FRAMES} frames from default-annotations.json."
    )
    page.shot("imported")
    with page.expect_download() as download:
        page.click("#export-json")
    # the session's export: the file's frames and clicks, its masks as the session redid them
    # from the clicks where there were some (a few pixels apart at most)
    again = json.loads(Path(download.value.path()).read_text())
    assert [f["frame_index"] for f in again["frames"]] == [
        f["frame_index"] for f in exported["frames"]
    ]
    for ours, theirs in zip(again["frames"], exported["frames"], strict=True):
        [item], [before] = ours["objects"], theirs["objects"]
        assert (item.get("labels"), item.get("points")) == (
            before.get("labels"),
            before.get("points"),
        )
        overlap = rle_decode(item["mask"]) & rle_decode(before["mask"])
        union = rle_decode(item["mask"]) | rle_decode(before["mask"])
        assert overlap.sum() >= 0.9 * union.sum()


def object_masks(server: str, session_id: str) -> dict[int, dict]:
    """Object 1's mask on each frame that has one, as the server holds it."""
    return {
        frame["frame_index"]: frame["objects"][0]["mask"]
        for frame in server_annotations(server, session_id)["frames"]
    }


def test_a_correction_round_changes_only_the_frames_the_correction_governs(server, page) -> None:
    # one click on the ball, then a propagation started with its key
    session_id = open_default_video(server, page)
    truth = demo_masks(0)["ball"]
    first = first_click(truth)
    with page.expect_response(is_add_points):
        click_at(page, first.x, first.y)
    page.keyboard.press("p")
    page.wait_for_selector("#editor[data-propagated=done]", timeout=60_000)
    assert page.text_content("#progress-label") == f"Done: {FRAMES} frames from frame 1."
    before = object_masks(server, session_id)
    assert sorted(before) == list(range(FRAMES))

    # G and a number go to a frame where the mask took the ball's shadow too; the user's
    # click there is negative, on the shadow
    page.keyboard.press("g")
    page.keyboard.type("101")
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"() => document.getElementById('editor').dataset.frameShown === '{CORRECTED}'"
    )
    assert page.text_content("#frame-label") == f"{CORRECTED + 1} / {FRAMES}"
    propagated = rle_decode(before[CORRECTED])
    shadow = next_click(propagated, demo_masks(CORRECTED)["ball"])
    assert shadow is not None
    assert not shadow.positive
    with page.expect_response(is_add_points):
        click_at(page, shadow.x, shadow.y, button="right")
    corrected = rle_decode(object_masks(server, session_id)[CORRECTED])
    assert not corrected[shadow.y, shadow.x]
    assert page.get_attribute("#timeline", "data-anchors") == f"0,{CORRECTED}"

    # [ and ] step between the ball's clicked frames, Home and End to the ends
    for key, frame_index in (("Home", 0), ("]", CORRECTED), ("]", CORRECTED), ("End", FRAMES - 1),
                             ("[", CORRECTED), ("[", 0), ("]", CORRECTED)):  # fmt: skip
        page.keyboard.press(key)
        page.wait_for_function(
            f"() => document.getElementById('frame-label').textContent"
            f" === '{frame_index + 1} / {FRAMES}'"
        )

    # the propagation from the corrected frame, with its progress
    page.keyboard.press("p")
    page.wait_for_function(
        "() => / frames from frame 101$/.test(document.getElementById('progress-label')"
        ".textContent)"
    )
    page.wait_for_selector("#editor[data-propagated=done]", timeout=60_000)
    page.shot("corrected")
    assert page.text_content("#progress-label") == f"Done: {FRAMES} frames from frame 101."
    after = object_masks(server, session_id)

    # frames nearer frame 0's click keep their masks; the corrected frame lost the shadow's part
    # around the click
    nearer_frame_0 = range(CORRECTED // 2 + 1)
    assert [after[i] == before[i] for i in nearer_frame_0] == [True] * len(nearer_frame_0)
    assert not rle_decode(after[CORRECTED])[shadow.y, shadow.x]
    assert [after[i] != before[i] for i in range(CORRECTED, FRAMES)] == [True] * (
        FRAMES - CORRECTED
    )


def added_points(response) -> dict:
    """What an ``addPoints`` request sent: its labels, and its points in video pixels."""
    sent = json.loads(response.request.post_data)["variables"]["input"]
    points = [[x * WIDTH, y * HEIGHT] for x, y in sent["points"]]
    return {"object": sent["objectId"], "labels": sent["labels"], "points": points}


def is_add_points(response) -> bool:
    return "mutation Add" in (response.request.post_data or "")


def test_objects_have_their_own_colours_and_points_can_be_removed(server, page) -> None:
    session_id = open_default_video(server, page)
    for _ in range(10):
        page.click("#add-object")
    swatches = page.eval_on_selector_all(
        ".objects .swatch", "all => all.map(s => s.style.background)"
    )
    assert len(swatches) == 11
    assert len(set(swatches)) == 11

    # object 11 gets a positive click, a negative one (right button), then loses the negative one
    with page.expect_response(is_add_points) as first:
        click_at(page, 256, 216)
    with page.expect_response(is_add_points) as second:
        click_at(page, 600, 400, button="right")
    with page.expect_response(is_add_points) as third:
        click_at(page, 600, 400)  # on the point: removes it
    page.shot("ten-objects")

    sent = [added_points(answer.value) for answer in (first, second, third)]
    assert [(s["object"], s["labels"]) for s in sent] == [(11, [1]), (11, [1, 0]), (11, [1])]
    np.testing.assert_allclose(sent[1]["points"], [[256.5, 216.5], [600.5, 400.5]], atol=1)
    np.testing.assert_allclose(sent[2]["points"], [[256.5, 216.5]], atol=1)
    objects = server_annotations(server, session_id)["frames"][0]["objects"]
    assert [item["object_id"] for item in objects] == [11]
    assert page.text_content("#objects li.selected .object-pick") == (
        "Object 11 · clicked on 1 frame"
    )

    # clear frame forgets the frame's points and masks
    with page.expect_response(lambda r: "mutation ClearFrame" in (r.request.post_data or "")):
        page.click("#clear-frame")
    assert server_annotations(server, session_id)["frames"] == []
    assert page.text_content("#objects li.selected .object-pick") == "Object 11"

    # for touch screens, a toggle makes taps mark background
    page.click("#mode")
    assert page.text_content("#mode") == "Taps mark: background"
    with page.expect_response(is_add_points) as negative:
        click_at(page, 600, 400)
    page.click("#mode")
    with page.expect_response(is_add_points) as positive:
        click_at(page, 256, 216)
    assert added_points(negative.value)["labels"] == [0]
    assert added_points(positive.value)["labels"] == [0, 1]
    assert server_annotations(server, session_id)["frames"] != []

    # removing the object removes its mask
    with page.expect_response(lambda r: "mutation Remove" in (r.request.post_data or "")):
        page.click("#objects li.selected .object-remove")
    page.wait_for_function("() => document.querySelectorAll('#objects li').length === 10")
    assert server_annotations(server, session_id)["frames"] == []


IMPORT_REFUSALS = [
    ("{not json", "bad.json is not a JSON annotation file."),
    ('{"video": "gallery/other.mp4", "frames": []}',
     'bad.json holds annotations of "gallery/other.mp4", not of this video.'),
    ('{"video": "gallery/default.mp4", "frames": [{"frame_index": 999, "objects": []}]}',
     "bad.json was not imported: frames[0].frame_index must be within 0..143, got 999"),
]  # fmt: skip


def test_import_refusals_are_explained_and_change_nothing(server, page, tmp_path: Path) -> None:
    # one session for the three files, each refused in turn (a session opened for each took
    # seconds of two loaded cores, and showed no more)
    session_id = open_default_video(server, page)
    with page.expect_response(is_add_points):
        click_at(page, 256, 216)
    before = server_annotations(server, session_id)

    for number, (content, message) in enumerate(IMPORT_REFUSALS):
        file = tmp_path / str(number) / "bad.json"
        file.parent.mkdir()
        file.write_text(content)

        page.set_input_files("#import-file", str(file))

        expect(page.locator("#message.error")).to_have_text(message)
        assert server_annotations(server, session_id) == before
        assert page.text_content("#objects li .object-pick") == "Object 1 · clicked on 1 frame"


def test_session_is_pinged_while_open_and_closed_when_left(server, page) -> None:
    page.clock.install()
    session_id = open_default_video(server, page)

    with page.expect_request(lambda request: PING in (request.post_data or "")):
        page.clock.run_for(61_000)

    # leaving by the site's header (a reload keeps the session: test_annotator_workplace_browser)
    page.click(".site-header a[href='/tv/']")
    page.wait_for_url(f"{server}/tv/")
    answer = graphql(
        server, "query($s: String!) { ping(input: {sessionId: $s}) { success } }", s=session_id
    )
    assert answer == {"data": {"ping": {"success": False}}}


def test_a_lost_session_is_reopened_with_the_pages_points(server, page) -> None:
    old_session = open_default_video(server, page)
    with page.expect_response(is_add_points):
        click_at(page, 256, 216)
    closed = graphql(
        server,
        "mutation($s: String!) { closeSession(input: {sessionId: $s}) { success } }",
        s=old_session,
    )
    assert closed == {"data": {"closeSession": {"success": True}}}

    click_at(page, 300, 230)
    page.wait_for_function("() => document.getElementById('message').textContent !== ''")

    assert page.text_content("#message") == (
        "The session had ended on the server; a new one is open, with your work."
    )
    new_session = page.get_attribute("#editor", "data-session-id")
    assert new_session != old_session
    page.wait_for_load_state("networkidle")
    objects = server_annotations(server, new_session)["frames"][0]["objects"]
    assert [item["object_id"] for item in objects] == [1]


def test_upload_opens_the_new_video(server, page, tmp_path: Path) -> None:
    clip = write_mp4(make_video(), tmp_path / "my clip.mp4")
    page.goto(f"{server}/")
    page.wait_for_selector(".video-card")
    cards = page.locator(".video-card").count()

    page.set_input_files("#upload-file", str(clip))
    page.wait_for_selector("#editor[data-ready=true]")
    page.shot("uploaded")

    assert page.text_content("#frame-label") == "1 / 12"
    # the name it was uploaded with, not the content hash that stores it
    assert page.text_content("#video-name") == "my clip.mp4"
    assert page.title() == "my clip.mp4 · Annotate"
    page.goto(f"{server}/")
    page.wait_for_selector(".video-card")
    assert page.locator(".video-card").count() == cards + 1


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("notes.mp4", b"GIF89a" + bytes(2000),
         "notes.mp4 was not added: notes.mp4 is not a readable video"),
        ("big.mp4", bytes(MAX_UPLOAD_MB * 2**20 + 1),
         f"big.mp4 is larger than the limit of {MAX_UPLOAD_MB} MB."),
    ],
)  # fmt: skip
def test_upload_refusals_are_explained(
    server, page, tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    file = tmp_path / name
    file.write_bytes(content)
    page.goto(f"{server}/")
    page.wait_for_selector(".video-card")
    cards = page.locator(".video-card").count()

    page.set_input_files("#upload-file", str(file))
    page.wait_for_selector("#message.error")

    assert page.text_content("#message") == message
    assert page.url == f"{server}/"
    page.reload()
    page.wait_for_selector(".video-card")
    assert page.locator(".video-card").count() == cards


@pytest.fixture
def var_with_default_video(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A VAR_DIR of the test's own, a copy of the run's that holds the default video (drawn once
    for the run: a `manage.py default_video` of its own took seconds of two loaded cores)."""
    var_dir = tmp_path / "var"
    shutil.copytree(request.getfixturevalue("_default_video_var"), var_dir)
    return var_dir


def test_the_gallery_pages_on(page, tmp_path: Path, var_with_default_video: Path) -> None:
    # given a library of 26 videos: the default one and 25 imported
    folder = tmp_path / "library"
    folder.mkdir()
    clip = write_mp4(make_video(frame_count=2), tmp_path / "clip.mp4")
    for n in range(25):
        (folder / f"clip-{n:02d}.mp4").write_bytes(clip.read_bytes())
    var_dir = var_with_default_video
    with running_server(var_dir) as other_server:
        done = manage("import_videos", str(folder), env=project_env(var_dir))
        assert done.returncode == 0, done.stderr

        page.goto(f"{other_server}/")
        page.wait_for_selector(".video-card")
        first_page = page.locator(".video-card").count()
        page.click("#more")
        page.wait_for_function("() => document.querySelectorAll('.video-card').length === 26")
        page.shot("second-page")

        assert first_page == 24
        assert page.is_hidden("#more")
        names = page.eval_on_selector_all(".video-card strong", "all => all.map(n => n.innerText)")
        assert names == ["default.mp4"] + [f"clip-{n:02d}.mp4" for n in range(25)]


def rle_cases() -> list[np.ndarray]:
    random = np.random.default_rng(3)
    tall = np.zeros((300, 2), bool)
    tall[5:290, 1] = True  # long runs: several 5-bit groups, negative differences
    big = np.zeros((HEIGHT, WIDTH), bool)
    big[100:400, 200:700] = True
    big[250:260, :] = False
    return [
        np.ones((1, 1), bool),
        np.zeros((1, 1), bool),
        np.zeros((7, 5), bool),
        np.ones((7, 5), bool),
        random.random((31, 17)) < 0.5,
        random.random((64, 48)) < 0.05,
        tall,
        big,
    ]


def test_the_pages_rle_decoder_matches_pycocotools(server, page) -> None:
    cases = rle_cases()
    page.goto(f"{server}/")

    decoded = page.evaluate(
        """async (cases) => {
            const { rleDecode, rleIsEmpty } = await import("/static/segmentation/rle.js");
            return cases.map((rle) => {
                const mask = rleDecode(rle);
                const ones = [];
                mask.forEach((value, index) => value && ones.push(index));
                return { ones, empty: rleIsEmpty(rle) };
            });
        }""",
        [rle_encode(mask) for mask in cases],
    )

    for mask, result in zip(cases, decoded, strict=True):
        truth = coco_mask.decode(coco_mask.encode(np.asfortranarray(mask.astype(np.uint8))))
        assert result["ones"] == np.flatnonzero(truth.ravel(order="C")).tolist()
        assert result["empty"] == (not mask.any())


@pytest.mark.parametrize(
    ("counts", "error"),
    [
        ("5", "the mask's runs overflow its size"),
        ("1", "the mask's runs do not cover its size"),
        ("1\x7f", "the mask's counts hold a foreign character"),
        ("1o", "the mask's counts end inside a number"),
    ],
)
def test_the_pages_rle_decoder_refuses_bad_counts(server, page, counts: str, error: str) -> None:
    page.goto(f"{server}/")

    message = page.evaluate(
        """async (counts) => {
            const { rleDecode } = await import("/static/segmentation/rle.js");
            try { rleDecode({ size: [2, 2], counts }); } catch (error) { return error.message; }
            return "no error";
        }""",
        counts,
    )

    assert message == error
