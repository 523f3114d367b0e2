"""The HLS relay's delay (issue 17): from a segment appearing in the origin's live playlist to its
last byte at a viewer of /ts.

    .venv/bin/python benchmarks/hls_delay.py [--seconds 15] [--source origin|upstream]

``--source origin``: the loopback HLS origin (loopback_fakes/hls_origin.py) publishes a 0.5 s
MPEG-TS segment (160x96, a few kB) every 0.5 s, with a target duration of 1 s, so the relay
reloads the playlist every 0.5-1 s. ``--source upstream``: loopback_fakes/sample_upstream.py's
live playlist, 1 s segments of 4 Mbit/s (500 kB; the relay spreads each over part of its duration).

MPEG-TS segments pass through the hub byte for byte, so the viewer finds each segment's last
packet in what it received (the origin's frames show their index; the upstream's last packet
names its segment) and notes when it arrived. The segments the relay joins with were published
before it joined and are left out. Prints the median and 90th percentile of the
delay, and the target: 1 s plus one playlist reload interval.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.local_server import served  # noqa: E402
from benchmarks.stats import nearest_rank  # noqa: E402
from loopback_fakes.hls_origin import SEGMENTS, HlsOrigin  # noqa: E402
from loopback_fakes.sample_upstream import SampleUpstream  # noqa: E402

TAIL_BYTES = 188  # a segment's last packet, as the viewer looks for it


class OriginSource:
    """The test suite's origin: 0.5 s segments of a few kB, target duration 1 s."""

    reload_interval = 1.0

    def __init__(self, folder: Path) -> None:
        self._origin = HlsOrigin(folder)
        self.url = self._origin.url("/ts/live.m3u8")

    def start(self) -> None:
        self._origin.restart()

    def first(self) -> int:
        """The first segment published after the relay joined."""
        return self._origin.requests[0].published

    def segment(self, number: int) -> bytes | None:
        return self._origin.segment(number) if number < SEGMENTS else None

    def published_at(self, number: int) -> float:
        return self._origin.published_at(number)

    def close(self) -> None:
        self._origin.close()


class UpstreamSource:
    """loopback_fakes/sample_upstream.py's live playlist: 1 s segments of 4 Mbit/s."""

    reload_interval = 1.0

    def __init__(self, folder: Path) -> None:
        self._upstream = SampleUpstream()
        self._segments = self._upstream.segments
        self.url = self._upstream.url("/live.m3u8")
        self._joined = 0

    def start(self) -> None:
        self._joined = self._segments.published()

    def first(self) -> int:
        return self._joined + 1

    def segment(self, number: int) -> bytes | None:
        return self._segments.segment(number) if number < self._segments.published() else None

    def published_at(self, number: int) -> float:
        return self._segments.published_at(number)

    def close(self) -> None:
        self._upstream.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="how long the viewer reads")
    parser.add_argument("--source", choices=["origin", "upstream"], default="origin")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        kind = OriginSource if arguments.source == "origin" else UpstreamSource
        source = kind(Path(folder) / "origin")
        playlist = Path(folder) / "channels.m3u"
        url = source.url
        playlist.write_text(f'#EXTM3U\n#EXTINF:-1 tvg-id="h",HLS\n{url}\n', encoding="utf-8")
        with served(CHANNELS_PLAYLIST_PATH=str(playlist)) as server:
            received: list[tuple[float, int]] = []  # (arrival, bytes received by then)
            data = bytearray()
            done = threading.Event()

            def watch() -> None:
                with requests.get(f"{server.base_url}/ts", stream=True, timeout=10) as response:
                    for chunk in response.iter_content(65536):
                        data.extend(chunk)
                        received.append((time.monotonic(), len(data)))
                        if done.is_set():
                            return

            source.start()
            answer = requests.post(
                f"{server.base_url}/api/admin/channel", json={"channel_id": "h"}, timeout=10
            )
            answer.raise_for_status()
            viewer = threading.Thread(target=watch, daemon=True)
            viewer.start()
            time.sleep(arguments.seconds)
            done.set()
            viewer.join(timeout=10)
        first = source.first()
        delays = []
        at = 0
        number = first
        while (segment := source.segment(number)) is not None:
            found = bytes(data).find(segment[-TAIL_BYTES:], at)
            if found == -1:
                break
            at = found + TAIL_BYTES
            arrival = next(t for t, size in received if size >= at)
            delays.append(arrival - source.published_at(number))
            number += 1
        source.close()
    p90 = nearest_rank(delays, 0.9)
    print(
        f"segment published -> its last byte at the viewer: median "
        f"{statistics.median(delays) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms over {len(delays)}"
        f" segments (target: 1 s + a reload interval of {source.reload_interval:g} s)"
    )


if __name__ == "__main__":
    main()
