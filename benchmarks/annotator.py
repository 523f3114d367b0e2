"""The annotator in a real browser: frame images, clicks, overlay drawing and playback.

    .venv/bin/python benchmarks/annotator.py [--clicks 20] [--plays 3]

Runs the real server on the drawn default video (854 x 480, 144 frames at 24 fps) and Debian's
Chromium (``/usr/bin/chromium``) through Playwright. Measures, as medians:

- ``GET /frames/<i>.jpg``: every frame once as it is first decoded, then again from the kept file;
- a click in the page until its ``addPoints`` answer has arrived (the overlay is drawn in the same
  task), alternating between two points so that each is a full first cut by the engine, and how
  much of it the engine took (the answer's ``Server-Timing``);
- drawing one frame's overlay (``maskImage``) in the page;
- playback with the masks after a propagation: the frames/s the page shows against the video's
  24, from frame 0 to the end, ``--plays`` times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from benchmarks.local_server import served  # noqa: E402

WIDTH, HEIGHT, FRAMES = 854, 480, 144
POINTS = ((256, 216), (687, 240))
PATH = "gallery/default.mp4"

# Timestamps of the frames the page shows, from the moment the play button is pressed.
WATCH_FRAMES = """() => {
    window.watch?.disconnect();
    window.shown = [];
    window.watch = new MutationObserver(() => window.shown.push(performance.now()));
    const editor = document.getElementById("editor");
    window.watch.observe(editor, { attributeFilter: ["data-frame-shown"] });
}"""
OVERLAY_MS = """async () => {
    const { maskImage } = await import("/static/segmentation/overlay.js");
    const { rleDecode } = await import("/static/segmentation/rle.js");
    const session = document.getElementById("editor").dataset.sessionId;
    const answer = await fetch(`/annotations/${session}.json`);
    const frame = (await answer.json()).frames[0];
    const masks = new Map(frame.objects.map((o) => [o.object_id, rleDecode(o.mask)]));
    const times = [];
    for (let i = 0; i < 30; i++) {
        const started = performance.now();
        maskImage(masks, %d, %d);
        times.push(performance.now() - started);
    }
    return times;
}""" % (WIDTH, HEIGHT)  # noqa: UP031 (JavaScript braces)


def frame_fetches(base: str) -> tuple[list[float], list[float]]:
    http = requests.Session()
    first, kept = [], []
    for times in (first, kept):
        for index in range(FRAMES):
            started = time.perf_counter()
            answer = http.get(f"{base}/frames/{index}.jpg", params={"video": PATH}, timeout=30)
            times.append(time.perf_counter() - started)
            answer.raise_for_status()
    return first, kept


def is_add_points(response) -> bool:
    return "mutation Add" in (response.request.post_data or "")


def in_browser(base: str, clicks: int, plays: int) -> tuple[list[float], ...]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto(f"{base}/annotate/")
        page.wait_for_selector("#editor[data-ready=true]")
        box = page.locator("#overlay").bounding_box()
        click_ms, engine_ms = [], []
        for n in range(clicks):
            page.click("#clear-all")
            x, y = POINTS[n % 2]
            started = time.perf_counter()
            with page.expect_response(is_add_points) as add:
                page.mouse.click(
                    box["x"] + x * box["width"] / WIDTH, box["y"] + y * box["height"] / HEIGHT
                )
            click_ms.append((time.perf_counter() - started) * 1000)
            engine_ms.append(float(add.value.headers["server-timing"].split("dur=")[1]))
        overlay_ms = page.evaluate(OVERLAY_MS)
        page.click("#propagate")
        page.wait_for_selector("#editor[data-propagated=done]", timeout=120_000)
        rates = []
        for _ in range(plays):
            page.evaluate(WATCH_FRAMES)
            page.click("#play")
            page.wait_for_function("() => document.getElementById('play').textContent === 'Play'")
            shown = page.evaluate("() => window.shown")
            rates.append((len(shown) - 1) / ((shown[-1] - shown[0]) / 1000))
        browser.close()
    return click_ms, engine_ms, overlay_ms, rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clicks", type=int, default=20)
    parser.add_argument("--plays", type=int, default=3)
    args = parser.parse_args()
    with served() as server:
        first, kept = frame_fetches(server.base_url)
        click_ms, engine_ms, overlay_ms, rates = in_browser(
            server.base_url, args.clicks, args.plays
        )

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.1f} ms"

    print(f"frame images, {FRAMES} frames of {WIDTH}x{HEIGHT}: first {ms(first)}, kept {ms(kept)}")
    click, engine = statistics.median(click_ms), statistics.median(engine_ms)
    others = statistics.median(c - e for c, e in zip(click_ms, engine_ms, strict=True))
    print(f"click to answer in the page: {click:.0f} ms ({args.clicks} clicks)")
    print(f"  of which the engine {engine:.0f} ms; everything else {others:.0f} ms")
    print(f"overlay drawing: {statistics.median(overlay_ms):.1f} ms a frame")
    shown = ", ".join(f"{rate:.1f}" for rate in rates)
    print(f"playback with masks: {statistics.median(rates):.1f} frames/s of 24 ({shown})")


if __name__ == "__main__":
    main()
