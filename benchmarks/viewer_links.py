"""Private viewer links (issue 51): how long after a revoke its /ts viewers are cut off, and
that a request without a link is refused.

    .venv/bin/python benchmarks/viewer_links.py [--viewers 50] [--rounds 5]

The real server (daphne) plays a loopback upstream's test pattern (a thread here) privately.
Each round makes a link, connects ``--viewers`` /ts viewers through it (aiohttp, reading),
revokes it through the admin API, and times from the revoke request's start to each viewer's
stream ending; then one more request with the revoked link and one without a link show their
refusals.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.local_server import served  # noqa: E402
from benchmarks.stats import nearest_rank  # noqa: E402
from channels_admin.streaming.pattern_encoder import PatternOptions  # noqa: E402
from loopback_fakes.pattern_upstream import PatternUpstream  # noqa: E402

OPTIONS = PatternOptions(width=320, height=180, fps=25, video_bitrate=300_000, gop_seconds=1.0)


async def viewer(session: aiohttp.ClientSession, url: str, ready: asyncio.Event) -> float:
    """Read the stream until it ends; when it ended (monotonic)."""
    async with session.get(url) as response:
        if response.status != 200:
            raise SystemExit(f"a viewer was refused: {await response.text()}")
        await response.content.readexactly(188)
        ready.set()
        while await response.content.read(65536):
            pass
    return time.monotonic()


async def round_(origin: str, viewers: int) -> list[float]:
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.post(f"{origin}/api/admin/links", json={"name": "bench"}) as made:
            link = await made.json()
        readies = [asyncio.Event() for _ in range(viewers)]
        url = f"{origin}/ts?t={link['token']}"
        tasks = [asyncio.create_task(viewer(session, url, ready)) for ready in readies]
        await asyncio.gather(*(ready.wait() for ready in readies))
        await asyncio.sleep(1.0)  # all of them playing
        began = time.monotonic()
        async with session.post(f"{origin}/api/admin/links/{link['id']}/revoke") as revoked:
            revoked.raise_for_status()
        ended = await asyncio.gather(*tasks)
        async with session.get(url) as again, session.get(f"{origin}/ts") as bare:
            refusals = (again.status, await again.text(), bare.status, await bare.text())
    print(f"  reconnecting: {refusals[:2]}; without a link: {refusals[2:]}")
    return [end - began for end in ended]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    upstream = PatternUpstream({"links-bench": OPTIONS}, key_frames=True)
    with tempfile.TemporaryDirectory() as work, contextlib.ExitStack() as stack:
        stack.callback(upstream.close)
        playlist = Path(work) / "channels.m3u"
        playlist.write_text(
            f'#EXTM3U\n#EXTINF:-1 tvg-id="bench",Bench\n{upstream.url("links-bench")}\n'
        )
        origin = stack.enter_context(served(CHANNELS_PLAYLIST_PATH=str(playlist))).base_url
        answer = requests.post(
            f"{origin}/api/admin/channel", json={"channel_id": "bench"}, timeout=10
        )
        answer.raise_for_status()
        time.sleep(2)  # its first key frame
        requests.post(f"{origin}/api/admin/private", json={"private": True}, timeout=10)
        cuts: list[float] = []
        for number in range(args.rounds):
            took = asyncio.run(round_(origin, args.viewers))
            cuts += took
            print(
                f"round {number + 1}: {args.viewers} viewers cut {min(took) * 1000:.0f} to"
                f" {max(took) * 1000:.0f} ms after the revoke request began"
            )
    print(
        f"revoke to cut, {len(cuts)} viewers: median {statistics.median(cuts) * 1000:.0f} ms,"
        f" p90 {nearest_rank(cuts, 0.9) * 1000:.0f} ms, worst {max(cuts) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
