"""The HLS output (issue 40): how soon a segment can be fetched, and what many HLS clients
behind nginx's cache cost the origin.

    .venv/bin/python benchmarks/hls_output.py [--clients 2000] [--seconds 30]

A loopback upstream (a thread here) streams the demo encoder's test pattern in real time
(320x180, 25 frames/s, a key frame every second, 300 kbit/s: 2 s segments of about 80 kB) and
notes when each key frame leaves it. The real server (daphne) relays it; nginx, configured as
docs/deploy.md says, caches ``/hls/`` in front of it.

- Availability delay: a poller reads the origin's playlist every 20 ms and notes when each new
  segment is listed (its first byte is fetchable from then on). The delay runs from the
  segment's first key frame leaving the upstream; a segment cannot close before the key frame
  that ends it, so its duration is the floor. Target: duration + 0.5 s.
- Clients: ``--clients`` asyncio/aiohttp clients through nginx, each reloading the playlist
  every second (half the target duration, as players do when a reload brings nothing) and
  fetching every segment it has not fetched, for ``--seconds``. Counted from nginx's log: the
  requests it passed to the origin per segment (target: 1.2 at most) and per second of
  playlist (its cache lifetime is 1 s); and whether every client got every segment listed
  while it ran.
- ``--private``: the stream is private and the clients share one viewer link: each playlist
  request carries its token, and each segment URI the signature the playlist gave it
  (channels.md, "Private viewer links"); origin requests are counted per segment path.
  ``--delay-seconds 0`` skips the availability measure.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import re
import resource
import secrets
import shutil
import statistics
import subprocess
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
from channels_admin.streaming.ts_scan import ProgramScanner  # noqa: E402
from loopback_fakes.nginx_config import (  # noqa: E402
    answered_here,
    hls_cache_configuration,
    log_lines,
    origin_requests,
)
from loopback_fakes.pattern_upstream import PatternUpstream  # noqa: E402

OPTIONS = PatternOptions(width=320, height=180, fps=25, video_bitrate=300_000, gop_seconds=1.0)
SEGMENT = re.compile(r"^(seg-[0-9a-f]{8}-\d+\.ts(?:\?[^\s]*)?)$", re.MULTILINE)
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def first_key_pts(segment: bytes) -> int | None:
    return next((s.pts for s in ProgramScanner().scan(segment) if s.key), None)


def duration_of(playlist: str, name: str) -> float:
    return float(playlist.split(f"\n{name}")[0].rsplit("#EXTINF:", 1)[1].split(",")[0])


def availability(
    origin: str, upstream: PatternUpstream, seconds: float
) -> list[tuple[float, float]]:
    """(delay from the first key frame leaving the upstream to the segment being listed, the
    segment's duration) for each segment that came out in ``seconds``."""
    seen: set[str] = set(SEGMENT.findall(requests.get(f"{origin}/hls/live.m3u8", timeout=5).text))
    found = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = requests.get(f"{origin}/hls/live.m3u8", timeout=5).text
        listed = time.monotonic()
        for name in SEGMENT.findall(text):
            if name in seen:
                continue
            seen.add(name)
            pts = first_key_pts(requests.get(f"{origin}/hls/{name}", timeout=5).content)
            if pts in upstream.sent:
                found.append((listed - upstream.sent[pts], duration_of(text, name)))
        time.sleep(0.02)
    return found


def availability_line(delays: list[tuple[float, float]]) -> str:
    if not delays:
        return "availability: not measured"
    over = [delay - duration for delay, duration in delays]
    return (
        f"availability: {len(delays)} segments of {statistics.median(d for _, d in delays)} s;"
        f" delay from the first key frame median {statistics.median(d for d, _ in delays):.3f}"
        f" s, p90 {nearest_rank([d for d, _ in delays], 0.9):.3f} s, worst"
        f" {max(d for d, _ in delays):.3f} s; beyond the duration median"
        f" {statistics.median(over) * 1000:.0f} ms, p90 {nearest_rank(over, 0.9) * 1000:.0f}"
        f" ms, worst {max(over) * 1000:.0f} ms (target 500 ms)"
    )


async def hls_client(
    session: aiohttp.ClientSession, front: str, until: float, got: set[str], query: str
) -> set[str]:
    """A player: reloads the playlist every second, fetches each segment once; the names it
    saw listed (from its second reload, when it has caught up)."""
    listed: set[str] = set()
    reloads = 0
    while time.monotonic() < until:
        async with session.get(f"{front}/hls/live.m3u8{query}") as response:
            text = await response.text()
        # a segment is its path: its signature changes from one playlist to the next
        uris = {uri.split("?")[0]: uri for uri in SEGMENT.findall(text)}
        names = list(uris)
        reloads += 1
        for name in names if reloads > 1 else names[-1:]:
            if name not in got:
                async with session.get(f"{front}/hls/{uris[name]}") as response:
                    await response.read()
                    if response.status == 200:
                        got.add(name)
            if reloads > 1:
                listed.add(name)
        await asyncio.sleep(1.0)
    return listed


async def crowd(
    front: str, clients: int, seconds: float, query: str = ""
) -> list[tuple[set[str], set[str]]]:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        until = time.monotonic() + seconds
        results = []

        async def one(delay: float) -> None:
            await asyncio.sleep(delay)  # arriving over a second, not in one instant
            got: set[str] = set()
            listed = await hls_client(session, front, until, got, query)
            results.append((listed, got))

        await asyncio.gather(*(one(index / clients) for index in range(clients)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--delay-seconds", type=float, default=30.0)
    parser.add_argument("--private", action="store_true", help="clients through a viewer link")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.clients)), hard))
    upstream = PatternUpstream({"hls-bench": OPTIONS}, key_frames=True)
    with tempfile.TemporaryDirectory() as work_dir, contextlib.ExitStack() as stack:
        work = Path(work_dir)
        stack.callback(upstream.close)
        playlist = work / "channels.m3u"
        playlist.write_text(
            f'#EXTM3U\n#EXTINF:-1 tvg-id="bench",Bench\n{upstream.url("hls-bench")}\n'
        )
        # nginx checks the segments' signatures with the server's secret (docs/deploy.md)
        segment_secret = secrets.token_urlsafe(32)
        server = stack.enter_context(
            served(CHANNELS_PLAYLIST_PATH=str(playlist), CHANNELS_SEGMENT_SECRET=segment_secret)
        )
        origin = server.base_url
        answer = requests.post(
            f"{origin}/api/admin/channel", json={"channel_id": "bench"}, timeout=10
        )
        answer.raise_for_status()
        query = ""
        if args.private:
            requests.post(f"{origin}/api/admin/private", json={"private": True}, timeout=10)
            link = requests.post(f"{origin}/api/admin/links", json={"name": "bench"}, timeout=10)
            query = f"?t={link.json()['token']}"
        while (
            len(SEGMENT.findall(requests.get(f"{origin}/hls/live.m3u8{query}", timeout=5).text)) < 2
        ):
            time.sleep(0.2)

        delays = availability(origin, upstream, args.delay_seconds) if args.delay_seconds else []
        print(availability_line(delays))

        port = int(origin.rsplit(":", 1)[1])
        front_port = _free_port()
        nginx_dir = work / "nginx"
        nginx_dir.mkdir()
        (nginx_dir / "nginx.conf").write_text(
            hls_cache_configuration(
                nginx_dir, port=front_port, origin=port, segment_secret=segment_secret
            )
        )
        proxy = subprocess.Popen([NGINX, "-c", str(nginx_dir / "nginx.conf"), "-p", str(nginx_dir)])  # noqa: S603
        stack.callback(proxy.wait, timeout=10)
        stack.callback(proxy.terminate)
        front = f"http://127.0.0.1:{front_port}"
        while True:
            with contextlib.suppress(requests.ConnectionError):
                requests.get(f"{front}/healthz", timeout=1)
                break
            time.sleep(0.1)
        began = time.monotonic()
        results = asyncio.run(crowd(front, args.clients, args.seconds, query))
        elapsed = time.monotonic() - began
        counts = origin_requests(nginx_dir)
        segments: dict[str, int] = {}
        for uri, n in counts.items():
            if uri.startswith("/hls/seg-"):
                segments[uri.split("?")[0]] = segments.get(uri.split("?")[0], 0) + n
        playlist_requests = sum(n for uri, n in counts.items() if uri.startswith("/hls/live.m3u8"))
        complete = sum(listed <= got for listed, got in results)
        refused = collections.Counter(status for _, status in answered_here(nginx_dir))
        print(
            f"{args.clients} clients through nginx for {elapsed:.1f} s:"
            f" {len(segments)} segments, origin requests per segment:"
            f" mean {statistics.mean(segments.values()):.2f}, worst {max(segments.values())}"
            f" (target 1.2); playlist: {playlist_requests} origin requests,"
            f" {playlist_requests / elapsed:.2f} a second (cache lifetime 1 s);"
            f" clients that got every segment listed while they played: {complete} of"
            f" {len(results)}; requests through nginx: {len(log_lines(nginx_dir))}, answered by"
            f" nginx itself (a refused signature: 403, 410): {dict(refused)}"
        )
        print(f"server: {os.cpu_count()} cores; hls_viewers now:", _status(origin)["hls_viewers"])


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _status(origin: str) -> dict:
    return requests.get(f"{origin}/api/admin/status", timeout=5).json()


if __name__ == "__main__":
    main()
