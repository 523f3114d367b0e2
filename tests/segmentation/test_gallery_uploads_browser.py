"""The gallery's uploads in Chromium: a long upload's preparation shown with its progress and
cancelled, a failure shown with its reason and dismissed, an upload a page left shown on the
next, and one that becomes ready added to the gallery."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import running_server
from tests.segmentation.test_preparations import files_under
from tests.segmentation.test_upload_limits import growing_video


@pytest.fixture(scope="module")
def var(default_video_var: Path) -> Path:
    return default_video_var


@pytest.fixture(scope="module")
def server(var: Path) -> Iterator[str]:
    with running_server(var, MAX_UPLOAD_PIXELS=str(320 * 240)) as url:
        yield url


def test_a_long_upload_shows_its_progress_and_is_cancelled(
    server: str, var: Path, page, slow_video: Path
) -> None:
    page.goto(f"{server}/")
    page.wait_for_selector(".video-card")
    cards = page.locator(".video-card").count()
    before = files_under(var / "media")

    page.set_input_files("#upload-file", str(slow_video))
    page.wait_for_selector(".preparation[data-state=preparing]")
    page.wait_for_function("() => document.querySelector('.preparation progress')?.value > 0")
    page.shot("preparing")
    label = page.text_content(".preparation-label")
    assert label.startswith("Preparing noise.mp4: ")
    assert label.endswith(" of about 1440)")

    # a page opened meanwhile shows it too
    other = page.context.new_page()
    other.goto(f"{server}/")
    other.wait_for_selector(".preparation[data-state=preparing]")
    other.close()

    page.click(".preparation-cancel")
    page.wait_for_function("() => !document.querySelector('.preparation')")

    page.reload()
    page.wait_for_selector(".video-card")
    assert page.locator(".preparation").count() == 0
    assert page.locator(".video-card").count() == cards
    assert page.url == f"{server}/"
    # the preparation's thread deletes its files as it stops, a moment after the cancel
    deadline = time.monotonic() + 10
    while files_under(var / "media") != before:
        assert time.monotonic() < deadline, files_under(var / "media")
        time.sleep(0.1)


def test_a_failed_preparation_says_why_and_is_dismissed(
    server: str, var: Path, page, tmp_path: Path
) -> None:
    grows = growing_video(tmp_path / "grows.ts", first=(320, 240), then=(640, 480))
    page.goto(f"{server}/")
    page.wait_for_selector(".video-card")

    page.set_input_files("#upload-file", str(grows))
    page.wait_for_selector(".preparation[data-state=failed]")
    page.shot("failed")

    assert page.text_content(".preparation-label.error") == (
        "grows.ts was not added: grows.ts has a frame of 640x480 where its header says 320x240: "
        "pictures of at most 76,800 pixels are taken"
    )
    assert page.text_content(".preparation-cancel") == "Dismiss"
    page.reload()
    page.wait_for_selector(".preparation[data-state=failed]")  # kept until dismissed
    page.click(".preparation-cancel")
    page.wait_for_function("() => !document.querySelector('.preparation')")
    page.reload()
    page.wait_for_selector(".video-card")
    assert page.locator(".preparation").count() == 0
