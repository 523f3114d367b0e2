"""Where a /ts server process spends its time at a given number of viewers, by py-spy.

    .venv/bin/python benchmarks/fanout_profile.py [--viewers 3000] [--seconds 8]
        [--servers project,bare] [--bitrate 4000000]

For each server: the upstream and a fresh server as in benchmarks/fanout.py, ``--viewers``
viewers connected and settled, then py-spy samples the server for ``--seconds`` (100 a second,
its own threads included). Prints the server's CPU use and the share of samples spent in each
part: the socket writes (the ``send`` system call), Twisted's write buffers, daphne, the asyncio
loop, Channels, the hub and its consumers, the load guard, and the rest; then the functions with
the most samples of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fanout import (  # noqa: E402
    PROJECT_APP,
    SETTLE_SECONDS,
    bench_environment,
    connect,
    cpu_seconds,
    serving,
    start,
)

SAMPLES_PER_SECOND = 100
# A sample counts for the first part whose marker is in its innermost frame, else in any frame.
PARTS = [
    ("socket send (system call)", "untilConcludes"),
    ("Twisted write buffers", "twisted/internet/abstract.py"),
    ("Twisted reactor and TCP", "twisted/internet/"),
    ("daphne", "daphne/"),
    ("load guard", "channels_admin/streaming/admission.py"),
    ("GOP cache", "channels_admin/streaming/gop_cache.py"),
    # the hub as it was measured: the fan-out, the failover loop and the upstream reader
    ("hub", "channels_admin/streaming/hub.py"),
    ("hub", "channels_admin/streaming/failover.py"),
    ("hub", "channels_admin/streaming/upstream_reader.py"),
    ("consumers", "channels_admin/consumers.py"),
    ("bare broadcaster", "benchmarks/bare_broadcaster.py"),
    ("Channels", "channels/"),
    ("asyncio loop", "asyncio/"),
]


def part_of(frames: list[str]) -> str:
    for name, marker in PARTS:
        if marker in frames[-1]:
            return name
    for name, marker in PARTS:
        if any(marker in frame for frame in frames):
            return name
    return "other"


def summary(raw: Path) -> tuple[collections.Counter, collections.Counter, int]:
    """Samples per part and per innermost function, and the total, from py-spy's raw output."""
    parts: collections.Counter = collections.Counter()
    functions: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        parts[part_of(frames)] += int(count)
        functions[frames[-1]] += int(count)
        total += int(count)
    return parts, functions, total


async def watched(port: int, viewers: int, seconds: float, pid: int, raw: Path) -> float:
    """Connect ``viewers``, settle, profile the server for ``seconds``: its CPU use, cores."""
    connected = await connect(port, viewers)
    await asyncio.sleep(SETTLE_SECONDS)
    cpu_before, started = cpu_seconds(pid), time.monotonic()
    spy = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("py-spy")),
        *("record", "-p", str(pid), "-d", str(int(seconds))),
        *("-r", str(SAMPLES_PER_SECOND), "-f", "raw", "-o", str(raw), "--nonblocking"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    await spy.wait()
    cpu = (cpu_seconds(pid) - cpu_before) / (time.monotonic() - started)
    for transport, _ in connected:
        transport.abort()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--servers", type=lambda s: s.split(","), default=["project", "bare"])
    parser.add_argument("--bitrate", type=int, default=4_000_000)
    args = parser.parse_args()
    work, env = bench_environment("fanout-profile-")
    port_file = work / "upstream.port"
    upstream = start(
        [
            sys.executable,
            "-m",
            "loopback_fakes.sample_upstream",
            str(port_file),
            "--bitrate",
            str(args.bitrate),
        ],
        env,
        work / "upstream.log",
    )
    try:
        while not port_file.exists() or not port_file.read_text():
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}/live.ts"
        playlist = work / "bench.m3u"
        playlist.write_text(f'#EXTM3U\n#EXTINF:-1 tvg-id="bench",Bench\n{url}\n')
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        known = {
            "project": (PROJECT_APP, {"CHANNELS_PLAYLIST_PATH": str(playlist)}),
            "bare": ("benchmarks.bare_broadcaster:app", {"UPSTREAM_URL": url}),
        }
        for name in args.servers:
            app, extra = known[name]
            raw = work / f"{name}.raw"
            with serving(name, app, {**env, **extra}, work / f"{name}.log") as (pid, port):
                cpu = asyncio.run(watched(port, args.viewers, args.seconds, pid, raw))
            parts, functions, total = summary(raw)
            print(f"{name}: {args.viewers} viewers, server CPU {cpu:.2f} cores, {total} samples")
            for part, count in parts.most_common():
                print(f"  {count / total:6.1%}  {part}")
            print("  most samples of their own:")
            for function, count in functions.most_common(8):
                print(f"  {count / total:6.1%}  {function}")
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)


if __name__ == "__main__":
    main()
