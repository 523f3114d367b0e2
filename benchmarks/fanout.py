"""Fan-out benchmark: how many viewers of /ts one server process carries at full rate.

    .venv/bin/python benchmarks/fanout.py [--steps 1000,1500,...] [--rounds 2]
        [--bitrate 4000000] [--upstream-write 65536] [--seconds 8]
        [--servers project,bare] [--segment-seconds 1]

One upstream at ``--bitrate`` (a local HTTP server, loopback_fakes/sample_upstream.py). For
each server and each step of viewers: connect the viewers, let them settle, then count each
viewer's bytes over ``--seconds``. A step is sustained when EVERY viewer received at least 95%
of the upstream rate. The servers (``--servers``) are:

- ``project``: this project's /ts, relaying the upstream's endless MPEG-TS stream;
- ``project-hls``: this project's /ts, relaying the same bytes from the upstream's live HLS
  playlist (``--segment-seconds`` segments). Its data comes a segment at a time, so a window
  may hold one segment fewer than its length: full rate there is 95% of the window's bytes
  less one segment;
- ``bare``: a bare ASGI broadcaster of the TS stream, the ceiling.

Past capacity (``--overload 1.5,2``): after its steps, each server meets crowds of those
multiples of its largest sustained step in that round, each in a fresh process (a flash crowd
on a server that has learned nothing), connecting as fast as the steps do. Each crowd's window
starts 10 s after it arrived, once the server has sorted it out. Reported per crowd: the viewers
admitted (200) and refused (503), how fast the refusals came, the admitted that the server cut
off afterwards, how many viewers got full rate in the window, and how a later wave of 100
viewers was answered.

The servers take turns for ``--rounds`` rounds, as single runs vary by a step either way on a
shared 2-core machine. Prints, per server, the largest sustained step of each round with the
server's CPU use there, each server's median against the first one's, the overload crowds'
medians, and the upstream's connection count.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
FULL_RATE = 0.95
SETTLE_SECONDS = 3.0
# A crowd past capacity is measured once the server has sorted it out (refused, cut off), and
# then meets a second, small wave of viewers: how a server that has found its room answers.
CROWD_SETTLE_SECONDS = 10.0
LATER_WAVE = 100
CONNECT_BATCH = 100
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LOOPBACK_UPSTREAMS = "127.0.0.0/8,::1"  # CHANNELS_UPSTREAM_ALLOW for a local upstream
PROJECT_APP = "config.asgi:application"


class Viewer(asyncio.BufferedProtocol):
    """Counts bytes and keeps none: every viewer reads into one shared scratch buffer. Notes the
    response's status and how long after the request it came."""

    scratch = memoryview(bytearray(1 << 20))

    def __init__(self) -> None:
        self.received = 0
        self.lost = False
        self.status = 0
        self.asked_at = 0.0
        self.answered_in = 0.0

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.scratch

    def buffer_updated(self, nbytes: int) -> None:
        if not self.received:
            self.answered_in = time.monotonic() - self.asked_at
            head = bytes(self.scratch[:12])
            self.status = int(head[9:12]) if head.startswith(b"HTTP/1.") else -1
        self.received += nbytes

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


@dataclass
class Step:
    viewers: int
    sustained: bool
    slowest_rate: float  # of the upstream's, for the slowest viewer
    cpu: float  # server process, cores
    client_cpu: float = 0.0  # this process (every viewer's reads), cores
    rss_growth_mb: float = 0.0  # server memory added during the window
    median_rate: float = 0.0


@dataclass
class Crowd:
    """A crowd past capacity: what became of its viewers."""

    viewers: int
    admitted: int  # answered 200
    refused: int  # answered 503
    refusal_ms: list[float]  # how long each refusal took
    cut_off: int  # admitted, then their stream ended by the server before the window's end
    full_rate: int  # viewers at >= FULL_RATE over the window
    cpu: float  # server process, cores, over the window
    client_cpu: float  # this process, cores
    later_refused: int  # of the LATER_WAVE that asked after the window
    later_ms: list[float]  # how long each of their refusals took


async def connect(port: int, viewers: int) -> list[tuple[asyncio.Transport, Viewer]]:
    """``viewers`` connections asking for /ts, in batches; the server closes each at its
    response's end, so a stream it ends shows as a lost connection."""
    loop = asyncio.get_running_loop()
    request = f"GET /ts HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    connected = []
    for start in range(0, viewers, CONNECT_BATCH):
        batch = await asyncio.gather(
            *(
                loop.create_connection(Viewer, "127.0.0.1", port)
                for _ in range(min(CONNECT_BATCH, viewers - start))
            )
        )
        for transport, protocol in batch:
            protocol.asked_at = time.monotonic()
            transport.write(request.encode())
            connected.append((transport, protocol))
        await asyncio.sleep(0.05)
    return connected


async def window(
    port: int,
    viewers: int,
    bitrate: int,
    seconds: float,
    pid: int,
    burst: float,
    *,
    settle: float = SETTLE_SECONDS,
    later: int = 0,
) -> tuple[list[Viewer], list[float], list[bool], Step, list[Viewer]]:
    """Connect, settle, count every viewer's bytes over ``seconds``, then let ``later`` more
    ask, disconnect: the viewers, each one's rate (of the upstream's), whether each was
    disconnected, the step, and the later ones. ``burst``: the bytes the upstream may deliver
    at once, which a window may lack."""
    connected = await connect(port, viewers)
    protocols = [protocol for _, protocol in connected]
    await asyncio.sleep(settle)
    before = [p.received for p in protocols]
    cpu_before, rss_before, started = cpu_seconds(pid), rss_mb(pid), time.monotonic()
    client_before = time.process_time()
    await asyncio.sleep(seconds)
    after = [p.received for p in protocols]
    cpu_after, rss_after, elapsed = cpu_seconds(pid), rss_mb(pid), time.monotonic() - started
    client_cpu = (time.process_time() - client_before) / elapsed
    lost = [p.lost for p in protocols]
    wave = await connect(port, later) if later else []
    await asyncio.sleep(2.0 if later else 0.0)
    for transport, _ in connected + wave:
        transport.abort()
    await asyncio.sleep(1.5)  # let the server clean up before the next step
    expected = bitrate / 8 * elapsed
    rates = [(b - a) / expected for a, b in zip(before, after, strict=True)]
    ordered = sorted(rates)
    cpu = (cpu_after - cpu_before) / elapsed
    sustained = ordered[0] >= FULL_RATE * (expected - burst) / expected and not any(lost)
    step = Step(
        viewers,
        sustained,
        ordered[0],
        cpu,
        client_cpu,
        rss_after - rss_before,
        ordered[len(ordered) // 2],
    )
    return protocols, rates, lost, step, [protocol for _, protocol in wave]


async def measure(
    port: int, viewers: int, bitrate: int, seconds: float, pid: int, burst: float
) -> Step:
    return (await window(port, viewers, bitrate, seconds, pid, burst))[3]


async def crowd(
    port: int, viewers: int, bitrate: int, seconds: float, pid: int, burst: float
) -> Crowd:
    protocols, rates, lost, step, wave = await window(
        port,
        viewers,
        bitrate,
        seconds,
        pid,
        burst,
        settle=CROWD_SETTLE_SECONDS,
        later=LATER_WAVE,
    )
    full = FULL_RATE * (1 - burst / (bitrate / 8 * seconds))
    return Crowd(
        viewers,
        admitted=sum(p.status == 200 for p in protocols),
        refused=sum(p.status == 503 for p in protocols),
        refusal_ms=[p.answered_in * 1000 for p in protocols if p.status == 503],
        cut_off=sum(p.status == 200 and gone for p, gone in zip(protocols, lost, strict=True)),
        full_rate=sum(rate >= full for rate in rates),
        cpu=step.cpu,
        client_cpu=step.client_cpu,
        later_refused=sum(p.status == 503 for p in wave),
        later_ms=[p.answered_in * 1000 for p in wave if p.status == 503],
    )


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
    server = "edge.server" if app == PROJECT_APP else "daphne"
    process = start(
        [sys.executable, "-m", server, "-e", "tcp:0:interface=127.0.0.1:backlog=2048", app],
        env,
        log,
    )
    port = int(wait_for(r"Listening on TCP address 127\.0\.0\.1:(\d+)", log).group(1))
    return process, port


@contextlib.contextmanager
def serving(name: str, app: str, env: dict, log: Path) -> Iterator[tuple[int, int]]:
    """A fresh server process relaying the upstream: its pid and port."""
    process, port = daphne(app, env, log)
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
        yield process.pid, port
    finally:
        process.terminate()
        process.wait(timeout=10)


def burst_bytes(name: str, args: argparse.Namespace) -> float:
    return args.bitrate / 8 * args.segment_seconds if name == "project-hls" else 0.0


def run_server(name: str, app: str, env: dict, args: argparse.Namespace, work: Path) -> list[Step]:
    """Every step measured, up to and including the first that is not sustained."""
    steps = []
    log = work / f"{name}.log"
    with serving(name, app, env, log) as (pid, port):
        for viewers in args.steps:
            decided = len(guard_lines(log))
            step = asyncio.run(
                measure(port, viewers, args.bitrate, args.seconds, pid, burst_bytes(name, args))
            )
            steps.append(step)
            print(
                f"  {name:11} {viewers:5} viewers: slowest {step.slowest_rate:6.1%} "
                f"(median {step.median_rate:6.1%}) of the rate, "
                f"server CPU {step.cpu:4.2f} cores (viewers {step.client_cpu:4.2f}), "
                f"memory {step.rss_growth_mb:+6.1f} MB -> "
                + ("ok" if step.sustained else "NOT sustained")
                + guard_text(guard_lines(log)[decided:]),
                flush=True,
            )
            if not step.sustained:
                break
    return steps


def run_crowd(
    name: str, app: str, env: dict, args: argparse.Namespace, work: Path, viewers: int
) -> Crowd:
    log = work / f"{name}-{viewers}.log"
    with serving(name, app, env, log) as (pid, port):
        result = asyncio.run(
            crowd(port, viewers, args.bitrate, args.seconds, pid, burst_bytes(name, args))
        )
    print(
        f"  {name:11} {viewers:5} crowd: {result.admitted} admitted, {result.refused} refused"
        f"{timing(result.refusal_ms)}, {result.cut_off} cut off later, {result.full_rate} at "
        f"full rate; server CPU {result.cpu:4.2f} cores (viewers {result.client_cpu:4.2f}); "
        f"{LATER_WAVE} later: {result.later_refused} refused{timing(result.later_ms)}"
        + guard_text(guard_lines(log)),
        flush=True,
    )
    return result


GUARD_LINE = re.compile(r"(\d\d:\d\d:\d\d),\d+ WARNING [\w.]+: (refusing viewers past .*)")


def guard_lines(log: Path) -> list[str]:
    """The load guard's decisions in a server's log (``streaming/admission.py``), timed."""
    return [" ".join(m.groups()) for m in GUARD_LINE.finditer(log.read_text(errors="replace"))]


def guard_text(lines: list[str]) -> str:
    return "".join(f"\n      guard: {line}" for line in lines)


def timing(milliseconds: list[float]) -> str:
    if not milliseconds:
        return ""
    return f" in {statistics.median(milliseconds):.0f} ms median, {max(milliseconds):.0f} at most"


def best(steps: list[Step]) -> Step | None:
    sustained = [s for s in steps if s.sustained]
    return sustained[-1] if sustained else None


def overload_summary(rounds: list[tuple[Crowd, int]]) -> str:
    """The measures of graceful degradation, each the median over the rounds."""
    crowds = [crowd for crowd, _ in rounds]

    def median(values: list[float]) -> float:
        return statistics.median(values)

    refusals = [statistics.median(c.refusal_ms) for c in crowds if c.refusal_ms]
    slowest = [max(c.refusal_ms) for c in crowds if c.refusal_ms]
    later = [statistics.median(c.later_ms) for c in crowds if c.later_ms]
    return (
        f"offered {median([c.viewers for c in crowds]):g}, "
        f"admitted {median([c.admitted for c in crowds]):g}, "
        f"refused {median([c.refused for c in crowds]):g}"
        + (f" (in {median(refusals):.0f} ms, at most {median(slowest):.0f} ms)" if refusals else "")
        + f", cut off {median([c.cut_off for c in crowds]):g}, "
        f"at full rate {median([c.full_rate for c in crowds]):g}: "
        f"{median([c.full_rate / c.admitted if c.admitted else 0 for c in crowds]):.0%} of the "
        f"admitted, {median([c.full_rate / sustained for c, sustained in rounds]):.0%} "
        f"of the sustained step; {LATER_WAVE} later: "
        f"{median([c.later_refused for c in crowds]):g} refused"
        + (f" in {median(later):.0f} ms" if later else "")
    )


def bench_environment(prefix: str) -> tuple[Path, dict[str, str]]:
    """A work folder and the servers' environment (their own SQLite there, no Redis); as many
    open files as this process may have, one a viewer."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    work = Path(tempfile.mkdtemp(prefix=prefix))
    env = {**os.environ, "VAR_DIR": str(work / "var"), "LOG_LEVEL": "INFO"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    # the benchmarks' upstreams run on this machine, which the hub refuses by default
    env.setdefault("CHANNELS_UPSTREAM_ALLOW", LOOPBACK_UPSTREAMS)
    return work, env


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
    parser.add_argument(
        "--overload",
        type=lambda s: [float(n) for n in s.split(",") if n],
        default=[1.5, 2.0],
        help="crowds past capacity, as multiples of the largest sustained step ('' for none)",
    )
    args = parser.parse_args()
    work, env = bench_environment("fanout-")

    port_file = work / "upstream.port"
    upstream_log = work / "upstream.log"
    upstream = start(
        [
            sys.executable, "-m", "loopback_fakes.sample_upstream", str(port_file),
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
        # per server and multiple: each round's crowd, with the sustained step it multiplied
        crowds: dict[tuple[str, float], list[tuple[Crowd, int]]] = {}
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_}", flush=True)
            for name, app, extra in servers:
                steps = run_server(name, app, {**env, **extra}, args, work)
                sustained = best(steps) or Step(0, False, 0.0, 0.0)
                results[name].append(sustained)
                if steps[0].sustained:
                    cpu_at_first[name].append(steps[0].cpu)
                for times in args.overload if sustained.viewers else []:
                    viewers = round(sustained.viewers * times)
                    result = run_crowd(name, app, {**env, **extra}, args, work, viewers)
                    crowds.setdefault((name, times), []).append((result, sustained.viewers))
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
    for (name, times), results_ in crowds.items():
        print(f"{name:11}: crowds of {times:g}x its sustained step, medians of {len(results_)}:")
        print("  " + overload_summary(results_))
    runs = args.rounds * len(results) + sum(len(r) for r in crowds.values())
    print(f"upstream connections: {connections} in {runs} server runs (one each)")


if __name__ == "__main__":
    main()
