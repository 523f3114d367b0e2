"""Time to the first decoded frame for a viewer who joins a playing channel at a random moment,
with the hub's GOP cache and without it (issue 17).

    .venv/bin/python benchmarks/first_frame.py [--joins 20] [--gop 4] [--seed 17]

One local upstream serves the live test pattern (640x360, 25 frames/s, H.264 with a key frame
every ``--gop`` seconds) over HTTP. Two servers run side by side, one with
``CHANNELS_GOP_CACHE_KB=0`` (the cache off, as before it existed) and one with the default
cache, each with that channel playing. Joins alternate between them, each after a random pause
of up to one GOP: a viewer opens /ts and feeds the video PES to an H.264 decoder until the
first frame comes out. Prints the median, 90th percentile and worst per server, and the ratio
of the medians.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import av
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.local_server import served  # noqa: E402
from benchmarks.stats import nearest_rank  # noqa: E402
from channels_admin.streaming.pattern_encoder import PatternOptions  # noqa: E402
from channels_admin.streaming.ts import TS_PACKET as PACKET  # noqa: E402
from loopback_fakes.pattern_upstream import PatternUpstream  # noqa: E402

VIDEO_PID = 0x100  # FFmpeg's muxer gives its first stream this PID
JOIN_TIMEOUT_SEC = 30


def first_frame_seconds(base_url: str) -> float:
    """From the request for /ts to the first frame an H.264 decoder gives."""
    decoder = av.CodecContext.create("h264", "r")
    started = time.monotonic()
    pending = b""
    with requests.get(f"{base_url}/ts", stream=True, timeout=JOIN_TIMEOUT_SEC) as response:
        for chunk in response.iter_content(PACKET * 64):
            pending += chunk
            whole = len(pending) - len(pending) % PACKET
            data, pending = pending[:whole], pending[whole:]
            for packet in _video_payloads(data):
                try:
                    for parsed in decoder.parse(packet):
                        if decoder.decode(parsed):
                            return time.monotonic() - started
                except av.error.InvalidDataError:
                    continue  # slices that refer to a key frame this viewer never got
            if time.monotonic() - started > JOIN_TIMEOUT_SEC:
                break
    raise SystemExit(f"{base_url}: no frame within {JOIN_TIMEOUT_SEC}s")


def _video_payloads(data: bytes):
    """The H.264 bytes in the video PID's packets (PES headers taken off)."""
    for at in range(0, len(data), PACKET):
        packet = data[at : at + PACKET]
        if ((packet[1] & 0x1F) << 8 | packet[2]) != VIDEO_PID or not packet[3] & 0x10:
            continue
        start = 4 + (1 + packet[4] if packet[3] & 0x20 else 0)
        payload = packet[start:]
        if packet[1] & 0x40 and payload[:3] == b"\x00\x00\x01":
            payload = payload[9 + payload[8] :]
        yield payload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--joins", type=int, default=20, help="joins per server")
    parser.add_argument("--gop", type=float, default=4.0, help="key frame interval (s)")
    parser.add_argument("--seed", type=int, default=17)
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    upstream = PatternUpstream({"first-frame": PatternOptions(gop_seconds=arguments.gop)})
    url = upstream.url("first-frame")
    with tempfile.TemporaryDirectory() as folder:
        playlist = Path(folder) / "channels.m3u"
        playlist.write_text(f'#EXTM3U\n#EXTINF:-1 tvg-id="gop",GOP\n{url}\n', encoding="utf-8")
        common = {"CHANNELS_PLAYLIST_PATH": str(playlist)}
        with served(**common, CHANNELS_GOP_CACHE_KB="0") as off, served(**common) as on:
            servers = {"cache off": off.base_url, "cache on": on.base_url}
            for base_url in servers.values():
                answer = requests.post(
                    f"{base_url}/api/admin/channel", json={"channel_id": "gop"}, timeout=10
                )
                answer.raise_for_status()
            time.sleep(arguments.gop + 1)  # both hubs flowing, past a first key frame
            times: dict[str, list[float]] = {name: [] for name in servers}
            for _ in range(arguments.joins):
                for name, base_url in servers.items():
                    time.sleep(rng.uniform(0, arguments.gop))
                    times[name].append(first_frame_seconds(base_url))
    upstream.close()
    for name, values in times.items():
        ordered = sorted(values)
        p90 = nearest_rank(ordered, 0.9)
        print(
            f"{name}: first frame median {statistics.median(values) * 1000:.0f} ms, "
            f"p90 {p90 * 1000:.0f} ms, worst {ordered[-1] * 1000:.0f} ms ({len(values)} joins)"
        )
    ratio = statistics.median(times["cache off"]) / statistics.median(times["cache on"])
    print(f"median without the cache / with it: {ratio:.1f}x")


if __name__ == "__main__":
    main()
