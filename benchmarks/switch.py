"""A channel switch as a viewer sees it (issue 17): from ``POST /api/admin/channel`` to the first
frame of the new channel shown by an already open viewer page (mpegts.js in Chromium).

    .venv/bin/python benchmarks/switch.py [--switches 20] [--gop 2] [--seed 17] [--hls]

One local upstream serves two live test patterns over HTTP (H.264 in MPEG-TS, a key frame every
``--gop`` seconds), each encoded all along, so that a connection joins it between key frames as
it would a real provider's: channel A at 640x360, channel B at 512x288, so the page tells them
apart by the size of the frame it shows. The viewer page (``/tv/``) plays A; then the page
itself posts each switch, alternating, after a random pause of up to one GOP, and times it
until the video element holds a frame of the new size (polled every 5 ms). Prints the median, 90th
percentile and worst, per channel switched to.

With ``--hls`` channel B is a live HLS playlist instead (the test suite's HLS origin,
tests/channels_admin/hls_origin.py: 160x96 H.264 in MPEG-TS segments of 0.5 s, each opening
with a key frame), so the switches alternate between a TS and an HLS channel.
"""

from __future__ import annotations

import argparse
import http.server
import queue
import random
import statistics
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from benchmarks.local_server import served  # noqa: E402
from channels_admin.test_pattern import PatternOptions, test_pattern_chunks  # noqa: E402
from tests.channels_admin.hls_origin import WIDTH as HLS_WIDTH  # noqa: E402
from tests.channels_admin.hls_origin import HlsOrigin  # noqa: E402

SIZES = {"a": (640, 360), "b": (512, 288)}
SWITCH_TIMEOUT_MS = 30_000

# Posts the switch and resolves with the milliseconds until a frame of ``width`` is shown.
TIMED_SWITCH = """async ([channel, width, timeout]) => {
    const started = performance.now();
    const video = document.getElementById("player");
    const shown = new Promise((resolve, reject) => {
        // The player rebuilds on the same element; a frame of the new size that the element
        // can show (readyState HAVE_CURRENT_DATA) is the new channel's first.
        const poll = setInterval(() => {
            if (video.videoWidth === width && video.readyState >= 2) {
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
PLAYING = """(width) => {
    const video = document.getElementById("player");
    return video.readyState >= 2 && video.videoWidth === width && video.currentTime > 0.5;
}"""


class LiveChannel:
    """One channel's live encoder, running from the start whether watched or not: a connection
    joins it wherever it is, as with a real provider, mostly between key frames."""

    def __init__(self, name: str, gop_seconds: float) -> None:
        width, height = SIZES[name]
        self._options = PatternOptions(width=width, height=height, gop_seconds=gop_seconds)
        self._label = name
        self._listeners: list[queue.SimpleQueue[bytes]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def listen(self) -> queue.SimpleQueue[bytes]:
        listener: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        with self._lock:
            self._listeners.append(listener)
        return listener

    def leave(self, listener: queue.SimpleQueue[bytes]) -> None:
        with self._lock:
            self._listeners.remove(listener)

    def _run(self) -> None:
        for chunk in test_pattern_chunks(self._options, label=self._label):
            with self._lock:
                for listener in self._listeners:
                    listener.put(chunk)


def upstream_start(gop_seconds: float) -> http.server.ThreadingHTTPServer:
    channels = {name: LiveChannel(name, gop_seconds) for name in SIZES}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            channel = channels[self.path.strip("/").split(".")[0]]
            self.send_response(200)
            self.send_header("Content-Type", "video/mp2t")
            self.end_headers()
            listener = channel.listen()
            try:
                while True:
                    self.wfile.write(listener.get())
            except OSError:
                pass
            finally:
                channel.leave(listener)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switches", type=int, default=20)
    parser.add_argument("--gop", type=float, default=2.0, help="key frame interval (s)")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--hls", action="store_true", help="channel B from a live HLS origin")
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    upstream = upstream_start(arguments.gop)
    base = f"http://127.0.0.1:{upstream.server_port}"
    urls = {name: f"{base}/{name}.ts" for name in SIZES}
    widths = {name: size[0] for name, size in SIZES.items()}
    times: dict[str, list[float]] = {name: [] for name in SIZES}
    with tempfile.TemporaryDirectory() as folder:
        origin = None
        if arguments.hls:
            origin = HlsOrigin(Path(folder) / "origin")
            urls["b"], widths["b"] = origin.url("/ts/live.m3u8"), HLS_WIDTH
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
            page.request.post(f"{server.base_url}/api/admin/channel", data={"channel_id": "a"})
            page.goto(f"{server.base_url}/tv/")
            page.wait_for_function(PLAYING, arg=widths["a"], timeout=SWITCH_TIMEOUT_MS)
            for number in range(arguments.switches):
                channel = "b" if number % 2 == 0 else "a"
                page.wait_for_timeout(rng.uniform(0, arguments.gop) * 1000)
                if origin is not None and channel == "b":
                    origin.restart()  # its live window starts afresh (it holds 24 s)
                milliseconds = page.evaluate(
                    TIMED_SWITCH, [channel, widths[channel], SWITCH_TIMEOUT_MS]
                )
                times[channel].append(milliseconds)
                print(f"switch {number + 1} to {channel}: {milliseconds:.0f} ms", flush=True)
            browser.close()
        if origin is not None:
            origin.close()
    upstream.shutdown()
    for channel, values in times.items():
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
        kind = "HLS" if arguments.hls and channel == "b" else f"TS, GOP {arguments.gop:g} s"
        print(
            f"switch to {channel} ({kind}), to its first frame shown:"
            f" median {statistics.median(values):.0f} ms, p90 {p90:.0f} ms,"
            f" worst {ordered[-1]:.0f} ms ({len(values)} switches)"
        )


if __name__ == "__main__":
    main()
