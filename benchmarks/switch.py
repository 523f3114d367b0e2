"""A channel switch as a viewer sees it (issue 17): from ``POST /api/admin/channel`` to the first
frame of the new channel shown by an already open viewer page (mpegts.js in Chromium).

    .venv/bin/python benchmarks/switch.py [--switches 10] [--gop 2] [--seed 17]

Two pairs of channels, each switched back and forth ``--switches`` times, the page posting each
switch itself after a random pause of up to one GOP:

- two TS channels: one local upstream (loopback_fakes/pattern_upstream.py) serves two live test
  patterns over HTTP (H.264 in MPEG-TS, a key frame every ``--gop`` seconds), each encoded all
  along, so that a connection joins it between key frames as it would a real provider's;
- two HLS channels: the live TS and fMP4 playlists of the loopback HLS origin
  (loopback_fakes/hls_origin.py: 160x96 H.264, segments of 0.5 s that open with a key frame).

A switch ends the page's stream and its player is rebuilt on the same video element: the time
runs until that element, emptied by the rebuild, holds a frame again (polled every 5 ms).
Prints the median, 90th percentile and worst per pair.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from benchmarks.local_server import served  # noqa: E402
from benchmarks.stats import nearest_rank  # noqa: E402
from channels_admin.streaming.pattern_encoder import PatternOptions  # noqa: E402
from loopback_fakes.hls_origin import HlsOrigin  # noqa: E402
from loopback_fakes.pattern_upstream import PatternUpstream  # noqa: E402

SIZES = {"a": (640, 360), "b": (512, 288)}
SWITCH_TIMEOUT_MS = 30_000

# Posts the switch and resolves with the milliseconds until a frame of ``width`` is shown.
TIMED_SWITCH = """async ([channel, timeout]) => {
    const started = performance.now();
    const video = document.getElementById("player");
    let emptied = false;
    video.addEventListener("emptied", () => { emptied = true; }, {once: true});
    const shown = new Promise((resolve, reject) => {
        const poll = setInterval(() => {
            if (emptied && video.readyState >= 2) {
                clearInterval(poll);
                resolve(performance.now() - started);
            }
        }, 5);
        setTimeout(() => { clearInterval(poll); reject(new Error("no frame")); }, timeout);
    });
    const answer = await fetch("/api/admin/channel", {
        method: "POST",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify({channel_id: channel}),
    });
    if (!answer.ok) throw new Error(await answer.text());
    return await shown;
}"""
PLAYING = """() => {
    const video = document.getElementById("player");
    return video.readyState >= 2 && video.currentTime > 0.5;
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switches", type=int, default=10, help="switches per pair")
    parser.add_argument("--gop", type=float, default=2.0, help="the TS channels' key frames (s)")
    parser.add_argument("--seed", type=int, default=17)
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    upstream = PatternUpstream(
        {
            name: PatternOptions(width=width, height=height, gop_seconds=arguments.gop)
            for name, (width, height) in SIZES.items()
        },
        live=True,
    )
    pairs = {f"TS, GOP {arguments.gop:g} s": ("a", "b"), "HLS": ("h1", "h2")}
    times: dict[str, list[float]] = {pair: [] for pair in pairs}
    with tempfile.TemporaryDirectory() as folder:
        origin = HlsOrigin(Path(folder) / "origin")
        urls = {name: upstream.url(name) for name in SIZES}
        urls |= {"h1": origin.url("/ts/live.m3u8"), "h2": origin.url("/fmp4/live.m3u8")}
        playlist = Path(folder) / "channels.m3u"
        entries = [f'#EXTINF:-1 tvg-id="{name}",{name}\n{url}' for name, url in urls.items()]
        playlist.write_text("#EXTM3U\n" + "\n".join(entries) + "\n", encoding="utf-8")
        with served(CHANNELS_PLAYLIST_PATH=str(playlist)) as server, sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--autoplay-policy=no-user-gesture-required",
                ],
            )
            page = browser.new_page()
            for pair, (first, second) in pairs.items():
                origin.restart()  # its live window starts afresh (it holds 24 s)
                page.request.post(
                    f"{server.base_url}/api/admin/channel", data={"channel_id": first}
                )
                page.goto(f"{server.base_url}/tv/")
                page.wait_for_function(PLAYING, timeout=SWITCH_TIMEOUT_MS)
                for number in range(arguments.switches):
                    channel = second if number % 2 == 0 else first
                    page.wait_for_timeout(rng.uniform(0, arguments.gop) * 1000)
                    if pair == "HLS":
                        origin.restart()  # the new channel's live window starts afresh
                    milliseconds = page.evaluate(TIMED_SWITCH, [channel, SWITCH_TIMEOUT_MS])
                    times[pair].append(milliseconds)
                    print(f"{pair}: switch {number + 1} to {channel}: {milliseconds:.0f} ms")
            browser.close()
        origin.close()
    upstream.close()
    for pair, values in times.items():
        ordered = sorted(values)
        p90 = nearest_rank(ordered, 0.9)
        print(
            f"switches between two {pair} channels, to the new one's first frame shown:"
            f" median {statistics.median(values):.0f} ms, p90 {p90:.0f} ms,"
            f" worst {ordered[-1]:.0f} ms ({len(values)} switches)"
        )


if __name__ == "__main__":
    main()
