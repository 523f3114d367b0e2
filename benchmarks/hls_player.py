"""hls.js in Chromium on the HLS output through channel switches and failovers (issue 40).

    .venv/bin/python benchmarks/hls_player.py

A real loopback origin (loopback_fakes/media_upstream.py) serves two channels of real
H.264 and AAC in MPEG-TS: X, whose primary is 320 pixels wide and its backup 384, and Y (one
source, 448). The page plays ``/hls/live.m3u8`` with hls.js and logs every frame it shows with
its width, so the script tells whose pictures play. Eight events in turn, five switches and
three failovers (X's primary killed twice, and Y's only source, which then plays the slate,
640 wide, until it is healed 3 s later): after each, the time until the page shows the
expected pictures, and whether hls.js met a fatal error.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from benchmarks.local_server import served  # noqa: E402
from loopback_fakes.media_upstream import Behaviour, MediaUpstream  # noqa: E402

WIDTHS = {"/a.ts": 320, "/b.ts": 384, "/c.ts": 448}
SLATE_WIDTH = 640
EVENT_TIMEOUT_SEC = 40.0
HEALED_AFTER_SEC = 3.0

PAGE = """<!doctype html>
<video id="player" muted autoplay playsinline></video>
<script src="/static/vendor/hls.js/dist/hls.min.js"></script>
<script>
  const video = document.getElementById("player");
  window.shown = [];
  window.fatal = [];
  const log = (now, meta) => {
    window.shown.push([performance.timeOrigin + now, meta.width]);
    video.requestVideoFrameCallback(log);
  };
  video.requestVideoFrameCallback(log);
  const hls = new Hls({ liveSyncDurationCount: 2 });
  hls.on(Hls.Events.ERROR, (event, data) => {
    if (data.fatal) window.fatal.push(data.details);
  });
  hls.loadSource("/hls/live.m3u8");
  hls.attachMedia(video);
  video.play().catch(() => {});
</script>
"""
FIRST_SHOWN = """([since, width]) => {
    const found = window.shown.find(([at, w]) => at > since && w === width);
    return found ? found[0] : null;
}"""

# (what happens, the width to see after it)
EVENTS = [
    ("switch to Y", 448),
    ("switch to X", 320),
    ("X's primary fails", 384),
    ("switch to Y", 448),
    ("switch to X", 320),
    ("X's primary fails", 384),
    ("switch to Y", 448),
    ("Y's only source fails", SLATE_WIDTH),
]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"{what}: not within {timeout} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    origin = MediaUpstream(clip_seconds=60.0, widths=WIDTHS)
    results: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        playlist = Path(folder) / "channels.m3u"
        playlist.write_text(
            "#EXTM3U\n"
            f'#EXTINF:-1 tvg-id="x",X\n{origin.url("/a.ts")}\n'
            f'#EXTINF:-1 tvg-id="x",X (backup)\n{origin.url("/b.ts")}\n'
            f'#EXTINF:-1 tvg-id="y",Y\n{origin.url("/c.ts")}\n',
            encoding="utf-8",
        )
        with served(CHANNELS_PLAYLIST_PATH=str(playlist), CHANNELS_DEMO="0") as server:
            base = server.base_url

            def select(channel_id: str) -> None:
                answer = requests.post(
                    f"{base}/api/admin/channel", json={"channel_id": channel_id}, timeout=10
                )
                answer.raise_for_status()

            select("x")
            # hls.js gives up on a playlist that keeps answering 503 (the channel is starting)
            wait_for(lambda: requests.get(f"{base}/hls/live.m3u8", timeout=5).ok, 30, "a playlist")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path="/usr/bin/chromium",
                    args=[
                        "--no-sandbox",
                        "--disable-gpu",
                        "--autoplay-policy=no-user-gesture-required",
                    ],
                )
                page = browser.new_page()
                page.route(
                    f"{base}/hls-player",
                    lambda route: route.fulfill(body=PAGE, content_type="text/html"),
                )
                started = time.time()
                page.goto(f"{base}/hls-player")
                wait_for(
                    lambda: page.evaluate(FIRST_SHOWN, [started * 1000, 320]), 40, "first picture"
                )
                for what, width in EVENTS:
                    time.sleep(4)  # a few segments of the channel before the event
                    at = time.time()
                    if what.startswith("switch to "):
                        select(what[-1].lower())
                    elif what.startswith("X's"):
                        origin.behaviour["/a.ts"] = Behaviour.REFUSE
                        origin.drop("/a.ts")
                    else:
                        origin.behaviour["/c.ts"] = Behaviour.REFUSE
                        origin.drop("/c.ts")
                    shown = wait_for(
                        lambda: page.evaluate(FIRST_SHOWN, [at * 1000, width]),  # noqa: B023
                        EVENT_TIMEOUT_SEC,
                        what,
                    )
                    results.append((what, shown / 1000 - at))
                    print(f"{what}: {width} px shown after {shown / 1000 - at:.2f} s", flush=True)
                    origin.behaviour["/a.ts"] = Behaviour.PLAY  # healed, for the next switch to X
                    if what.startswith("Y's"):
                        time.sleep(HEALED_AFTER_SEC)
                        healed = time.time()
                        origin.behaviour["/c.ts"] = Behaviour.PLAY
                        back = wait_for(
                            lambda: page.evaluate(FIRST_SHOWN, [healed * 1000, WIDTHS["/c.ts"]]),  # noqa: B023
                            EVENT_TIMEOUT_SEC,
                            "Y back",
                        )
                        results.append(("Y's source healed", back / 1000 - healed))
                        print(f"Y's source healed: 448 px after {back / 1000 - healed:.2f} s")
                time.sleep(4)
                at = time.time()
                moving = page.evaluate("() => document.getElementById('player').currentTime")
                time.sleep(2)
                moved = page.evaluate("() => document.getElementById('player').currentTime")
                fatal = page.evaluate("() => window.fatal")
                browser.close()
    origin.close()
    switches = [seconds for what, seconds in results if what.startswith("switch")]
    failovers = [seconds for what, seconds in results if not what.startswith("switch")]
    print()
    for name, values in (("switches", switches), ("failovers and the heal", failovers)):
        median, worst = statistics.median(values), max(values)
        print(f"{name} ({len(values)}): median {median:.2f} s, worst {worst:.2f} s")
    print(f"at the end: {moved - moving:.2f} s played in 2 s ({at - started:.0f} s in)")
    print(f"hls.js fatal errors: {fatal or 'none'}")


if __name__ == "__main__":
    main()
