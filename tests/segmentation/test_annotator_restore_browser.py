"""An import the server stops part way is continued by the page (issue 47): it says what it
restored, waits as the server says, and sends the remaining frames on top, by itself, until the
session holds every mask. In a real
browser (Debian's Chromium) against the real server, with a small ``RATE_LIMIT_COST``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import requests
from playwright.sync_api import expect

from segmentation.demo_video import demo_masks
from segmentation.rle import rle_encode
from tests.conftest import running_server
from tests.segmentation.test_annotation_work_limits import as_given
from tests.segmentation.test_annotator_browser import open_default_video, server_annotations
from tests.segmentation.test_annotator_import_browser import VIDEO

FRAMES = range(0, 144, 12)  # 12 frames of the default video, its 3 objects on each (but the
# star, which comes in after frame 0): 35 masks


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # 10 a second: the file's reading (12 to 16 KB: 1 + 4) and a few masks (1 each with the
    # classic engine, which keeps a given mask as it is) fit in a window, the 35 do not, so they
    # take several steps (a step that runs across the end of a window imports more: how many
    # depends on the clock; at 20 a second a loaded machine imported a mask no faster than the
    # window refilled, and took the 35 in one step)
    with running_server(
        tmp_path_factory.mktemp("annotator-restore-var"), RATE_LIMIT_COST="10/s"
    ) as base_url:
        yield base_url


def last_export() -> dict:
    """What the tab exported last: every object's drawn mask on each of :data:`FRAMES`, as an
    export lists them (those with a pixel)."""
    return {
        "video": VIDEO,
        "frames": [
            {
                "frame_index": i,
                "objects": [
                    {"object_id": number, "mask": rle_encode(mask)}
                    for number, mask in enumerate(demo_masks(i).values(), start=1)
                    if mask.any()
                ],
            }
            for i in FRAMES
        ],
    }


def spend_a_check(server: str, work: Path) -> dict:
    """The file checked by the server, as the page has it checked, from the page's address:
    the GraphQL answer."""
    operations = {"query": "mutation($file: Upload!) { uploadAnnotations(file: $file) }"}
    return requests.post(
        f"{server}/graphql",
        data={"operations": json.dumps(operations | {"variables": {"file": None}}),
              "map": json.dumps({"0": ["variables.file"]})},
        files={"0": (work.name, work.read_bytes(), "application/json")},
        timeout=30,
    ).json()  # fmt: skip


# Each message the page shows, with whether its Import control was disabled then.
RECORD_MESSAGES = """() => {
  window.shown = [];
  const message = document.getElementById("message");
  new MutationObserver(() => window.shown.push([
    message.textContent,
    document.getElementById("import-file").disabled,
  ])).observe(message, { childList: true, characterData: true, subtree: true });
}"""


def test_an_import_the_server_stopped_is_continued_until_every_mask_is_in(
    server, page, tmp_path
) -> None:
    # given a file of 35 masks
    first = open_default_video(server, page)
    saved = last_export()
    assert sum(len(frame["objects"]) for frame in saved["frames"]) == 35
    work = tmp_path / "work.json"
    work.write_text(json.dumps(saved))
    imports = []
    page.on(
        "request",
        lambda r: imports.append(r.url) if r.method == "POST" and "/annotations" in r.url else 0,
    )
    page.evaluate(RECORD_MESSAGES)
    # and this client's window spent (the page's check of the file is then refused, and sent
    # again after the wait it was told)
    while spend_a_check(server, work).get("errors") is None:
        pass

    # when it is imported
    page.set_input_files("#import-file", str(work))

    # then the page continues the import by itself until it is done
    expect(page.locator("#message")).to_have_text(
        "Imported the masks and clicks of 12 frames from work.json.", timeout=60_000
    )
    assert as_given(server_annotations(server, first), saved)
    # in steps: the first in place of the session's prompts, the others appended to it (a first
    # refused before any frame, when the file's upload took the window, is sent again as it was)
    assert 2 <= len(imports) <= 12
    appended = [parse_qs(urlparse(url).query).get("append") for url in imports]
    placed = appended.index(["1"]) if ["1"] in appended else len(appended)
    assert 1 <= placed <= 2
    assert appended == [None] * placed + [["1"]] * (len(imports) - placed)
    # saying what it restored, counting down, with Import disabled meanwhile
    shown = page.evaluate("window.shown")
    waits = [(text, disabled) for text, disabled in shown if "continuing in" in text]
    assert waits
    for text, disabled in waits:
        restored = re.fullmatch(r"Restored (\d+) of 35 masks; continuing in 1 s\.", text)
        assert restored is not None, text
        assert 0 <= int(restored.group(1)) < 35
        assert disabled
    restored_counts = [int(re.search(r"\d+", text).group()) for text, _ in waits]
    assert restored_counts == sorted(restored_counts)
    assert page.is_enabled("#import-file")
