"""The hub on two server processes through Redis: does the relay hold the stream's bitrate?

    .venv/bin/python benchmarks/relay.py [--bitrates 4,16,40] [--viewers 50] [--seconds 8]

Needs Redis (``REDIS_URL``, by default ``redis://127.0.0.1:6379/0``). For each bitrate (Mbit/s)
an upstream serves MPEG-TS at that rate; two project servers share a database and Redis; the
channel is selected on the first, which then owns the upstream and publishes what it reads; the
second follows through Redis. ``--viewers`` viewers on each server count their bytes over
``--seconds``. Prints, per bitrate and server, the slowest and median viewer's share of the
upstream rate (full rate: every viewer at 95% or more) and the server's CPU, and the upstream's
connection count (one per bitrate, whatever the number of processes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fanout import FULL_RATE, PROJECT_APP, daphne, measure, start  # noqa: E402


def run(bitrate: int, args: argparse.Namespace, work: Path, redis_url: str) -> int:
    """Measure both servers at ``bitrate``; the upstream's connection count."""
    env = {
        **os.environ,
        "VAR_DIR": str(work / f"var-{bitrate}"),  # its own playlist and database
        "LOG_LEVEL": "INFO",  # daphne says where it listens at INFO
        "REDIS_URL": redis_url,
        "CHANNELS_RELAY_PREFIX": f"bench-relay-{uuid.uuid4().hex[:8]}",
    }
    env.pop("DATABASE_URL", None)
    port_file = work / f"upstream-{bitrate}.port"
    upstream_log = work / f"upstream-{bitrate}.log"
    upstream = start(
        [
            sys.executable,
            "-m",
            "loopback_fakes.sample_upstream",
            str(port_file),
            "--bitrate",
            str(bitrate),
        ],
        env,
        upstream_log,
    )
    servers = []
    try:
        while not port_file.exists() or not port_file.read_text():
            time.sleep(0.05)
        playlist = work / f"relay-{bitrate}.m3u"
        url = f"http://127.0.0.1:{port_file.read_text()}/live.ts"
        playlist.write_text(f'#EXTM3U\n#EXTINF:-1 tvg-id="bench",Bench\n{url}\n')
        env["CHANNELS_PLAYLIST_PATH"] = str(playlist)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        servers = [
            daphne(PROJECT_APP, env, work / f"{name}-{bitrate}.log")
            for name in ("owner", "follower")
        ]
        ports = [port for _, port in servers]
        for port in reversed(ports):  # both hubs up, the follower's listening for switches
            requests.get(f"http://127.0.0.1:{port}/api/admin/status", timeout=10)
        selected = requests.post(
            f"http://127.0.0.1:{ports[0]}/api/admin/channel",
            json={"channel_id": "bench"},
            timeout=10,
        )
        if selected.status_code != 200:
            raise SystemExit(f"could not select the channel: {selected.text}")
        time.sleep(2)
        for name, (process, port) in zip(("owner", "follower"), servers, strict=True):
            step = asyncio.run(measure(port, args.viewers, bitrate, args.seconds, process.pid))
            print(
                f"  {bitrate / 1e6:4g} Mbit/s {name:8} {args.viewers} viewers: slowest "
                f"{step.slowest_rate:6.1%}, median {step.median_rate:6.1%} of the rate, "
                f"server CPU {step.cpu:4.2f} cores -> "
                + ("full rate" if step.sustained else "NOT full rate"),
                flush=True,
            )
        return upstream_log.read_text().count("upstream connection")
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait(timeout=10)
        upstream.terminate()
        upstream.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bitrates", type=lambda s: [int(float(n) * 1e6) for n in s.split(",")], default="4,16,40"
    )
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    work = Path(tempfile.mkdtemp(prefix="relay-"))
    print(
        f"two server processes, Redis at {redis_url}; full rate = every viewer >= {FULL_RATE:.0%}"
    )
    for bitrate in args.bitrates:
        connections = run(bitrate, args, work, redis_url)
        print(f"  {bitrate / 1e6:4g} Mbit/s: {connections} upstream connection(s)")


if __name__ == "__main__":
    main()
