"""Fan-out benchmark: how many viewers of /ts one server process carries at full rate.

    .venv/bin/python benchmarks/fanout.py [--steps 1000,1500,...] [--rounds 2]
        [--bitrate 4000000] [--upstream-write 65536] [--seconds 8]
        [--servers project,bare] [--segment-seconds 1]

One upstream at ``--bitrate`` (a local HTTP server, benchmarks/ts_upstream.py). For each server
and each step of viewers: connect the viewers, let them settle, then count each viewer's bytes
over ``--seconds``. A step is sustained when EVERY viewer received at least 95% of the upstream
rate. The servers (``--servers``) are:

- ``project``: this project's /ts, relaying the upstream's endless MPEG-TS stream;
- ``project-hls``: this project's /ts, relaying the same bytes from the upstream's live HLS
  playlist (``--segment-seconds`` segments). Its data comes a segment at a time, so a window
  may hold one segment fewer than its length: full rate there is 95% of the window's bytes
  less one segment;
- ``bare``: a bare ASGI broadcaster of the TS stream, the ceiling.

The servers take turns for ``--rounds`` rounds, as single runs vary by a step either way on a
shared 2-core machine. Prints, per server, the largest sustained step of each round with the
server's CPU use there, each server's median against the first one's, and the upstream's
connection count.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
FULL_RATE = 0.95
SETTLE_SECONDS = 3.0
CONNECT_BATCH = 100
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROJECT_APP = "config.asgi:application"


class Viewer(asyncio.BufferedProtocol):
    """Counts bytes and keeps none: every viewer reads into one shared scratch buffer."""

    scratch = memoryview(bytearray(1 << 20))

    def __init__(self) -> None:
        self.received = 0
        self.lost = False

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.scratch

    def buffer_updated(self, nbytes: int) -> None:
        self.received += nbytes

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


@dataclass
class Step:
    viewers: int
    sustained: bool
    slowest_rate: float  # of the upstream's, for the slowest viewer
    cpu: float  # server process, cores
    rss_growth_mb: float = 0.0  # server memory added during the window
    median_rate: float = 0.0


async def measure(
    port: int, viewers: int, bitrate: int, seconds: float, pid: int, burst: float
) -> Step:
    """``burst``: the bytes the upstream may deliver at once, which a window may lack."""
    loop = asyncio.get_running_loop()
    transports, protocols = [], []
    request = f"GET /ts HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    for start in range(0, viewers, CONNECT_BATCH):
        batch = await asyncio.gather(
            *(
                loop.create_connection(Viewer, "127.0.0.1", port)
                for _ in range(min(CONNECT_BATCH, viewers - start))
            )
        )
        for transport, protocol in batch:
            transport.write(request)
            transports.append(transport)
            protocols.append(protocol)
        await asyncio.sleep(0.05)
    await asyncio.sleep(SETTLE_SECONDS)
    before = [p.received for p in protocols]
    cpu_before, rss_before, started = cpu_seconds(pid), rss_mb(pid), time.monotonic()
    await asyncio.sleep(seconds)
    after = [p.received for p in protocols]
    cpu_after, rss_after, elapsed = cpu_seconds(pid), rss_mb(pid), time.monotonic() - started
    lost = any(p.lost for p in protocols)
    for transport in transports:
        transport.abort()
    await asyncio.sleep(1.5)  # let the server clean up before the next step
    expected = bitrate / 8 * elapsed
    rates = sorted((b - a) / expected for a, b in zip(before, after, strict=True))
    cpu = (cpu_after - cpu_before) / elapsed
    sustained = rates[0] >= FULL_RATE * (expected - burst) / expected and not lost
    return Step(viewers, sustained, rates[0], cpu, rss_after - rss_before, rates[len(rates) // 2])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(  # noqa: S603 (our own interpreter and scripts)
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )


def wait_for(pattern: str, log: Path, timeout: float = 60) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = re.search(pattern, log.read_text())
        if match:
            return match
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {pattern!r} in {log}:\n{log.read_text()}")


def daphne(app: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen, int]:
    # The project runs on its own server module (daphne with capped request bodies), as `make
    # run` starts it; the bare broadcaster on plain daphne.
    server = "config.server" if app == PROJECT_APP else "daphne"
    process = start(
        [sys.executable, "-m", server, "-e", "tcp:0:interface=127.0.0.1:backlog=2048", app],
        env,
        log,
    )
    port = int(wait_for(r"Listening on TCP address 127\.0\.0\.1:(\d+)", log).group(1))
    return process, port


def run_server(name: str, app: str, env: dict, args: argparse.Namespace, work: Path) -> list[Step]:
    """Every step measured, up to and including the first that is not sustained."""
    process, port = daphne(app, env, work / f"{name}.log")
    burst = args.bitrate / 8 * args.segment_seconds if name == "project-hls" else 0.0
    try:
        if app == PROJECT_APP:
            select = requests.post(
                f"http://127.0.0.1:{port}/api/admin/channel",
                json={"channel_id": "bench"},
                timeout=10,
            )
            if select.status_code != 200:
                raise SystemExit(f"could not select the channel: {select.text}")
        time.sleep(2)
        steps = []
        for viewers in args.steps:
            step = asyncio.run(
                measure(port, viewers, args.bitrate, args.seconds, process.pid, burst)
            )
            steps.append(step)
            print(
                f"  {name:11} {viewers:5} viewers: slowest {step.slowest_rate:6.1%} "
                f"(median {step.median_rate:6.1%}) of the rate, "
                f"server CPU {step.cpu:4.2f} cores, memory {step.rss_growth_mb:+6.1f} MB -> "
                + ("ok" if step.sustained else "NOT sustained"),
                flush=True,
            )
            if not step.sustained:
                break
        return steps
    finally:
        process.terminate()
        process.wait(timeout=10)


def best(steps: list[Step]) -> Step | None:
    sustained = [s for s in steps if s.sustained]
    return sustained[-1] if sustained else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[1000, 1500, 1750, 2000, 2250, 2500, 2750, 3000, 3500, 4000],
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bitrate", type=int, default=4_000_000)
    parser.add_argument("--upstream-write", type=int, default=65536)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--servers", type=lambda s: s.split(","), default=["project", "bare"])
    parser.add_argument("--segment-seconds", type=float, default=1.0)
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    work = Path(tempfile.mkdtemp(prefix="fanout-"))
    env = {**os.environ, "VAR_DIR": str(work / "var"), "LOG_LEVEL": "INFO"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)

    port_file = work / "upstream.port"
    upstream_log = work / "upstream.log"
    upstream = start(
        [
            sys.executable, "benchmarks/ts_upstream.py", str(port_file),
            "--bitrate", str(args.bitrate), "--write-size", str(args.upstream_write),
            "--segment-seconds", str(args.segment_seconds),
        ],
        env, upstream_log,
    )  # fmt: skip
    try:
        while not port_file.exists() or not port_file.read_text():
            time.sleep(0.05)
        upstream_url = f"http://127.0.0.1:{port_file.read_text()}/live.ts"
        playlists = {}
        for suffix, url in (("ts", upstream_url), ("hls", upstream_url[: -len("ts")] + "m3u8")):
            playlists[suffix] = work / f"bench-{suffix}.m3u"
            playlists[suffix].write_text(f'#EXTM3U\n#EXTINF:-1 tvg-id="bench",Bench\n{url}\n')
        migrate = subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=False
        )
        if migrate.returncode != 0:
            raise SystemExit("migrate failed")
        print(
            f"upstream {args.bitrate / 1e6:g} Mbit/s in {args.upstream_write}-byte writes; "
            f"{args.seconds:g} s per step; full rate = every viewer >= {FULL_RATE:.0%} "
            f"(HLS: of the window less one {args.segment_seconds:g} s segment)",
            flush=True,
        )
        known = {
            "project": (PROJECT_APP, {"CHANNELS_PLAYLIST_PATH": str(playlists["ts"])}),
            "project-hls": (PROJECT_APP, {"CHANNELS_PLAYLIST_PATH": str(playlists["hls"])}),
            "bare": ("benchmarks.bare_broadcaster:app", {"UPSTREAM_URL": upstream_url}),
        }
        servers = [(name, *known[name]) for name in args.servers]
        results: dict[str, list[Step]] = {name: [] for name, _, _ in servers}
        cpu_at_first: dict[str, list[float]] = {name: [] for name, _, _ in servers}
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_}", flush=True)
            for name, app, extra in servers:
                steps = run_server(name, app, {**env, **extra}, args, work)
                results[name].append(best(steps) or Step(0, False, 0.0, 0.0))
                if steps[0].sustained:
                    cpu_at_first[name].append(steps[0].cpu)
        connections = upstream_log.read_text().count("upstream connection")
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)

    print()
    medians = {}
    for name, steps in results.items():
        medians[name] = statistics.median(step.viewers for step in steps)
        rounds = ", ".join(f"{s.viewers} ({s.cpu:.2f} cores)" for s in steps)
        print(f"{name:11}: largest sustained per round: {rounds}; median {medians[name]:g}")
    first = args.servers[0]
    for name in args.servers[1:]:
        if medians[name]:
            print(f"ratio {first} / {name} (medians): {medians[first] / medians[name]:.0%}")
    for name, cpus in cpu_at_first.items():
        if cpus:
            print(
                f"{name:11}: server CPU at {args.steps[0]} viewers: "
                f"median {statistics.median(cpus):.2f} cores over {len(cpus)} rounds"
            )
    runs = args.rounds * len(results)
    print(f"upstream connections: {connections} in {runs} server runs (one each)")


if __name__ == "__main__":
    main()
