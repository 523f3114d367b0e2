"""Programme guide benchmark: a generated XMLTV of 10,000 channels over 7 days (~100 MB),
refreshed by ``manage.py guide_refresh`` from a loopback HTTP server (plain, then gzip): the
time of download + parse + store and the peak RSS of that process; then through the real
server, the time from ``POST /api/admin/guide/refresh`` to the status feed (what the TV page
reads) pushing the new programme.

    .venv/bin/python benchmarks/guide_parse.py [--channels 10000] [--days 7]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gzip
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests
import websockets
from local_server import ROOT, manage, served

SLOT = timedelta(hours=3)  # 56 programmes a channel a week: 100 MB with 10,000 channels
DESC = "Episode notes."


def guide_write(path: Path, *, channels: int, days: int) -> int:
    """The guide, from the start of today for ``days``; channel 0 is the demo channel
    ``demo.1`` (the default playlist's), its programmes titled ``Big guide <n>``. Returns the
    programmes written."""
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    slots = int(days * timedelta(days=1) / SLOT)
    ids = ["demo.1", *(f"ch{n:05d}.example" for n in range(1, channels))]
    with path.open("w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n<tv generator-info-name="bench">\n')
        for n, channel in enumerate(ids):
            out.write(
                f'  <channel id="{channel}"><display-name>Channel {n}</display-name>'
                f'<icon src="http://logo.example/{n}.png"/></channel>\n'
            )
        for n, channel in enumerate(ids):
            title = "Big guide" if n == 0 else f"Show of channel {n}"
            for slot in range(slots):
                begin = start + slot * SLOT
                out.write(
                    f'  <programme start="{begin:%Y%m%d%H%M%S} +0000" '
                    f'stop="{begin + SLOT:%Y%m%d%H%M%S} +0000" channel="{channel}">'
                    f"<title>{title} {slot}</title><sub-title>Episode {slot}</sub-title>"
                    f"<desc>{DESC}</desc></programme>\n"
                )
        out.write("</tv>\n")
    return channels * slots


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def serve(folder: Path) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def refresh_in_child(env: dict[str, str]) -> tuple[float, float, str]:
    """``manage.py guide_refresh`` in a child: wall seconds, its peak RSS (MB), its output."""
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "manage.py", "guide_refresh"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(output)
    return time.monotonic() - started, usage.ru_maxrss / 1024, output.strip().splitlines()[-1]


async def feed_until(base_url: str, title_prefix: str, started: float) -> float:
    """Seconds from ``started`` until the status feed pushes a ``now`` titled so."""
    url = base_url.replace("http", "ws") + "/ws/tv/status"
    async with websockets.connect(url, origin=base_url, max_size=None) as feed:
        while True:
            status = json.loads(await asyncio.wait_for(feed.recv(), 600))
            now = status.get("now") or {}
            if now.get("title", "").startswith(title_prefix):
                return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--channels", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=7)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-guide-"))
    started = time.monotonic()
    programmes = guide_write(folder / "guide.xml", channels=args.channels, days=args.days)
    size = (folder / "guide.xml").stat().st_size
    (folder / "guide.xml.gz").write_bytes(gzip.compress((folder / "guide.xml").read_bytes(), 6))
    print(
        f"guide: {args.channels} channels, {programmes} programmes, {size / 1e6:.1f} MB "
        f"({(folder / 'guide.xml.gz').stat().st_size / 1e6:.1f} MB gzip), "
        f"written in {time.monotonic() - started:.1f} s"
    )
    origin = serve(folder)
    base = f"http://127.0.0.1:{origin.server_port}"
    var_dir = Path(tempfile.mkdtemp(prefix="bench-guide-var-"))
    env = {**os.environ, "VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "config.settings"}
    env["LOG_LEVEL"] = "WARNING"
    manage("migrate", "--noinput", env=env)
    for name in ("guide.xml", "guide.xml.gz"):
        seconds, peak_mb, said = refresh_in_child({**env, "CHANNELS_GUIDE_URL": f"{base}/{name}"})
        print(f"manage.py guide_refresh of {name}: {seconds:.1f} s, peak RSS {peak_mb:.0f} MB")
        print(f"  {said}")

    # Through the server: from the refresh asked for to the feed the TV page reads.
    with served(
        CHANNELS_GUIDE_URL=f"{base}/guide.xml.gz",
        CHANNELS_GUIDE_REFRESH_SEC="0",
        # the demo channel may never play here (SERVER_URL names another port): it stays chosen
        CHANNELS_SWITCH_TIMEOUT_SEC="3600",
    ) as server:
        answer = requests.post(
            f"{server.base_url}/api/admin/channel", json={"channel_id": "demo.1"}, timeout=30
        )
        answer.raise_for_status()
        rss_before = server.rss_mb()
        asked = time.monotonic()
        waiting = threading.Thread(
            target=lambda: requests.post(
                f"{server.base_url}/api/admin/guide/refresh", timeout=900
            ).raise_for_status()
        )
        waiting.start()
        seconds = asyncio.run(feed_until(server.base_url, "Big guide", asked))
        waiting.join()
        print(
            f"server: refresh asked -> the status feed's now 'Big guide ...' in {seconds:.1f} s; "
            f"server RSS {rss_before:.0f} MB before, {server.rss_mb():.0f} MB after"
        )
    origin.shutdown()


if __name__ == "__main__":
    main()
