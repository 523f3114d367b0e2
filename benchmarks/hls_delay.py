"""The HLS relay's delay (issue 17): from a segment appearing in the origin's live playlist to its
last byte at a viewer of /ts.

    .venv/bin/python benchmarks/hls_delay.py [--seconds 15]

The test suite's HLS origin (tests/channels_admin/hls_origin.py) publishes a 0.5 s MPEG-TS
segment every 0.5 s (target duration 1 s, so the relay reloads the playlist every 0.5-1 s). MPEG-TS
segments pass through the hub byte for byte, so the viewer finds each segment's last packet in
what it received and notes when that arrived. The three segments the relay joins with were
published before it joined and are left out. Prints the median and 90th percentile of the delay,
and the target: 1 s plus one playlist reload interval.
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
from tests.channels_admin.hls_origin import SEGMENTS, HlsOrigin  # noqa: E402

RELOAD_INTERVAL_SEC = 1.0  # the origin's target duration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="how long the viewer reads")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        origin = HlsOrigin(Path(folder) / "origin")
        playlist = Path(folder) / "channels.m3u"
        url = origin.url("/ts/live.m3u8")
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

            origin.restart()
            answer = requests.post(
                f"{server.base_url}/api/admin/channel", json={"channel_id": "h"}, timeout=10
            )
            answer.raise_for_status()
            viewer = threading.Thread(target=watch, daemon=True)
            viewer.start()
            time.sleep(arguments.seconds)
            done.set()
            viewer.join(timeout=10)
        joined_with = origin.requests[0].published
        origin.close()
    delays = []
    at = 0
    for number in range(joined_with, SEGMENTS):
        last_packet = origin.segment(number)[-188:]
        found = bytes(data).find(last_packet, at)
        if found == -1:
            break
        at = found + 188
        arrival = next(t for t, size in received if size >= at)
        delays.append(arrival - origin.published_at(number))
    ordered = sorted(delays)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    print(
        f"segment published -> its last byte at the viewer: median "
        f"{statistics.median(delays) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms over {len(delays)}"
        f" segments (target: 1 s + a reload interval of {RELOAD_INTERVAL_SEC:g} s)"
    )


if __name__ == "__main__":
    main()
