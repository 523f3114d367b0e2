"""Failover as viewers see it (issue 40): from the moment the hub can know a source failed to
the first picture of the next source, in the viewer page (mpegts.js in Chromium) and in a plain
/ts client decoding with PyAV, with a crowd of /ts viewers connected throughout.

    .venv/bin/python benchmarks/failover.py [--failovers 20] [--viewers 100]
        [--kinds kill,stall,slow]

A real loopback origin (loopback_fakes/media_upstream.py) serves the channel's two
sources, real H.264 and AAC in MPEG-TS paced to real time: the primary 320 pixels wide, the
backup 384, so that a client tells whose pictures it shows by their width (the slate is 640).
The playing source is made to fail in turn: ``kill`` (its connection closed, new ones refused:
knowable at once), ``stall`` (it sends nothing: knowable after CHANNELS_STALL_TIMEOUT, 5 s),
``slow`` (10% of real time: knowable after the 10 s window). After each failover the failed
source is healed, so the next failover goes back to it, and the source that took over plays
``--settle`` seconds (12) first: a source that played 10 s starts its backoff afresh, one that
flaps sooner waits its backoff (up to 10 s), which this measures the failover without.

Then every source fails at once: the slate plays while the hub cycles through them with their
backoffs, and the first healed is taken (the failback).

Prints per kind and client the median, 90th percentile and worst time from the moment the
failure is knowable to the next source's first picture (below zero where the hub knew sooner),
and from the failure to the hub's decision (the status's last failure); the failback's times;
the viewers dropped (the server ended their stream), and the most upstream connections open at
once.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import av  # noqa: E402
import requests  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from benchmarks.local_server import served  # noqa: E402
from benchmarks.stats import nearest_rank  # noqa: E402
from loopback_fakes.media_upstream import Behaviour, MediaUpstream  # noqa: E402

WIDTHS = {"/a.ts": 320, "/b.ts": 384}
KNOWABLE_AFTER = {"kill": 0.0, "stall": 5.0, "slow": 10.0}
PICTURE_TIMEOUT_SEC = 40.0
SLATE_WIDTH = 640
FAILBACK_OUTAGE_SEC = 20.0
CLIP_SECONDS = 60.0

# Records the wall-clock time (ms since the epoch) and width of every frame the page shows.
FRAME_LOG = """() => {
    window.shown = [];
    const video = document.getElementById("player");
    const log = (now, meta) => {
        window.shown.push([performance.timeOrigin + now, meta.width]);
        video.requestVideoFrameCallback(log);
    };
    video.requestVideoFrameCallback(log);
}"""
FIRST_SHOWN = """([since, width]) => {
    const found = window.shown.find(([at, w]) => at > since && w === width);
    return found ? found[0] : null;
}"""


class PyAvClient(threading.Thread):
    """Decodes /ts as it comes; records (wall time, width) per frame."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.frames: list[tuple[float, int]] = []
        self.error = ""
        self.start()

    def run(self) -> None:
        try:
            with av.open(self.url, format="mpegts", timeout=30) as container:
                for frame in container.decode(video=0):
                    self.frames.append((time.time(), frame.width))
        except Exception as error:  # reported with the figures
            self.error = f"{type(error).__name__}: {error}"

    def first(self, since: float, width: int) -> float | None:
        return next((at for at, w in list(self.frames) if at > since and w == width), None)


class Crowd(threading.Thread):
    """``count`` plain /ts viewers on an event loop of their own."""

    def __init__(self, url: str, count: int) -> None:
        super().__init__(daemon=True)
        self.url, self.count = url, count
        self.received = [0] * count
        self.ended = [False] * count
        self._ready = threading.Event()
        self.start()

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
            viewers = [asyncio.create_task(self._view(session, n)) for n in range(self.count)]
            self._loop, self._done = asyncio.get_running_loop(), asyncio.Event()
            self._ready.set()
            await self._done.wait()
            for viewer in viewers:
                viewer.cancel()
            await asyncio.gather(*viewers, return_exceptions=True)

    async def _view(self, session: aiohttp.ClientSession, number: int) -> None:
        try:
            async with session.get(self.url) as response:
                async for chunk in response.content.iter_any():
                    self.received[number] += len(chunk)
        except aiohttp.ClientError:
            pass
        self.ended[number] = True  # the server ended this viewer's stream

    def stop(self) -> list[bool]:
        ended = list(self.ended)
        self._ready.wait()
        self._loop.call_soon_threadsafe(self._done.set)
        self.join(timeout=10)
        return ended


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"{what}: not within {timeout} s")


def measure_failback(origin: MediaUpstream, pyav: PyAvClient, page, playing: str):
    """Every source fails: the slate's first picture after the kill; then, the sources healed
    one after the other, the first to answer's first picture after its heal."""
    time.sleep(5)
    killed = time.time()
    for path in WIDTHS:
        origin.behaviour[path] = Behaviour.REFUSE
        origin.drop(path)
    slate_pyav = wait_for(lambda: pyav.first(killed, SLATE_WIDTH), 30, "the slate in PyAV")
    slate_page = wait_for(
        lambda: page.evaluate(FIRST_SHOWN, [killed * 1000, SLATE_WIDTH]), 30, "the slate"
    )
    time.sleep(FAILBACK_OUTAGE_SEC)  # the hub cycles, each source backing off further
    healed = time.time()
    other = "/b.ts" if playing == "/a.ts" else "/a.ts"
    origin.behaviour[other] = Behaviour.PLAY
    back_pyav = wait_for(lambda: pyav.first(healed, WIDTHS[other]), 30, "PyAV back")
    back_page = wait_for(
        lambda: page.evaluate(FIRST_SHOWN, [healed * 1000, WIDTHS[other]]), 30, "page back"
    )
    origin.behaviour[playing] = Behaviour.PLAY
    return [
        ("all sources killed, to the slate in PyAV", slate_pyav - killed),
        ("all sources killed, to the slate in the page", slate_page / 1000 - killed),
        (f"a source healed after {FAILBACK_OUTAGE_SEC:g} s, to it in PyAV", back_pyav - healed),
        ("a source healed, to it in the page", back_page / 1000 - healed),
    ]


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    return (
        f"median {statistics.median(ordered):.2f} s, p90 {nearest_rank(ordered, 0.9):.2f} s,"
        f" worst {ordered[-1]:.2f} s ({len(ordered)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failovers", type=int, default=20)
    parser.add_argument("--viewers", type=int, default=100)
    parser.add_argument("--kinds", default="kill,stall,slow")
    parser.add_argument(
        "--settle", type=float, default=12.0, help="seconds a source plays before it fails"
    )
    arguments = parser.parse_args()
    kinds = arguments.kinds.split(",")
    origin = MediaUpstream(clip_seconds=CLIP_SECONDS, widths=WIDTHS)
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        playlist = Path(folder) / "channels.m3u"
        playlist.write_text(
            "#EXTM3U\n"
            f'#EXTINF:-1 tvg-id="x",Primary\n{origin.url("/a.ts")}\n'
            f'#EXTINF:-1 tvg-id="x",Backup\n{origin.url("/b.ts")}\n',
            encoding="utf-8",
        )
        with served(CHANNELS_PLAYLIST_PATH=str(playlist), CHANNELS_DEMO="0") as server:
            base = server.base_url
            status = lambda: requests.get(f"{base}/api/admin/status", timeout=5).json()  # noqa: E731
            requests.post(f"{base}/api/admin/channel", json={"channel_id": "x"}, timeout=5)
            wait_for(lambda: status()["source"] == "primary", 20, "the primary plays")
            crowd = Crowd(f"{base}/ts", arguments.viewers)
            pyav = PyAvClient(f"{base}/ts")
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
                page.goto(f"{base}/tv/")
                page.evaluate(FRAME_LOG)
                playing = "/a.ts"
                since = time.time()
                wait_for(lambda: pyav.first(since, WIDTHS[playing]), 30, "PyAV's first picture")
                wait_for(
                    lambda: page.evaluate(FIRST_SHOWN, [since * 1000, WIDTHS[playing]]),
                    30,
                    "the page's first picture",
                )
                for number in range(arguments.failovers):
                    time.sleep(arguments.settle)
                    kind = kinds[number % len(kinds)]
                    backup = "/b.ts" if playing == "/a.ts" else "/a.ts"
                    failed_at = time.time()
                    if kind == "kill":
                        origin.behaviour[playing] = Behaviour.REFUSE
                        origin.drop(playing)
                    else:
                        origin.behaviour[playing] = (
                            Behaviour.STALL if kind == "stall" else Behaviour.SLOW
                        )
                    knowable = failed_at + KNOWABLE_AFTER[kind]
                    width = WIDTHS[backup]
                    # the next source's first picture after the failure: the hub may know a slow
                    # source before its window is over, so the time can be below zero
                    seen_pyav = wait_for(
                        functools.partial(pyav.first, failed_at, width), PICTURE_TIMEOUT_SEC, "PyAV"
                    )
                    seen_page = wait_for(
                        functools.partial(page.evaluate, FIRST_SHOWN, [failed_at * 1000, width]),
                        PICTURE_TIMEOUT_SEC,
                        "the page",
                    )
                    detected = datetime.datetime.fromisoformat(
                        status()["last_failure"]["at"]
                    ).timestamp()
                    times.setdefault((kind, "PyAV"), []).append(seen_pyav - knowable)
                    times.setdefault((kind, "page"), []).append(seen_page / 1000 - knowable)
                    times.setdefault((kind, "hub"), []).append(detected - failed_at)
                    print(
                        f"failover {number + 1} ({kind}, {playing} -> {backup}):"
                        f" the hub knew after {detected - failed_at:.2f} s;"
                        f" from knowable: PyAV {seen_pyav - knowable:.2f} s,"
                        f" page {seen_page / 1000 - knowable:.2f} s",
                        flush=True,
                    )
                    origin.behaviour[playing] = Behaviour.PLAY  # healed, for the way back
                    playing = backup
                failback = measure_failback(origin, pyav, page, playing)
                browser.close()
            ended = crowd.stop()
            final = status()
    print()
    for (kind, client), values in sorted(times.items()):
        what = "failure to the hub's decision" if client == "hub" else f"knowable to {client}"
        print(f"{kind:5} {what:32}: {summary(values)}")
    for what, seconds in failback:
        print(f"failback: {what}: {seconds:.2f} s")
    print(f"viewers dropped: {sum(ended)} of {arguments.viewers}")
    print(f"PyAV client error: {pyav.error or 'none'}")
    print(f"failovers counted by the status: {final['failovers']}")
    print(
        f"upstream connections: {len(origin.connections)} opened, most open at once:"
        f" {1 + max(c.overlapping for c in origin.connections)}"
    )
    origin.close()


if __name__ == "__main__":
    main()
