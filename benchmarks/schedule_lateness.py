"""The schedule's lateness (issue 51): 20 one-off entries spread over 10 minutes, run by two
server processes sharing one database and Redis; each switch's lateness against its time, and
how many switches each entry made (exactly one) and which process made them.

    .venv/bin/python benchmarks/schedule_lateness.py [--entries 20] [--minutes 10]

A real loopback origin (loopback_fakes/media_upstream.py) serves four channels of real H.264
and AAC in MPEG-TS; the entries switch between them in turn, the first 20 s after the start.
Lateness is the time from an entry's time to the switch being recorded (its row's switch time,
the moment the channel was selected, before every hub follows it). Needs Redis at
``REDIS_URL`` (default redis://127.0.0.1:6379/0).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from benchmarks.local_server import served  # noqa: E402
from loopback_fakes.media_upstream import MediaUpstream  # noqa: E402

CHANNELS = ("c0", "c1", "c2", "c3")
FIRST_AFTER_SEC = 20.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=10.0)
    arguments = parser.parse_args()
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = f"bench-schedule-{uuid.uuid4().hex[:8]}"
    origin = MediaUpstream()
    with tempfile.TemporaryDirectory() as folder:
        var_dir = Path(folder)
        playlist = var_dir / "channels.m3u"
        playlist.write_text(
            "#EXTM3U\n"
            + "".join(f'#EXTINF:-1 tvg-id="{c}",{c}\n{origin.url(f"/{c}.ts")}\n' for c in CHANNELS)
        )
        env = {
            "CHANNELS_PLAYLIST_PATH": str(playlist),
            "CHANNELS_DEMO": "0",
            "REDIS_URL": redis_url,
            "CHANNELS_RELAY_PREFIX": prefix,
            "CHANNELS_SCHEDULE_PREFIX": prefix,
        }
        with served(var_dir=var_dir, **env) as one, served(var_dir=var_dir, **env) as two:
            runs = measure(one.base_url, two.base_url, arguments.entries, arguments.minutes)
        logs = sorted(var_dir.glob("daphne*.log"))
        per_process = [
            sum(
                "schedule: " in line and ": switched to " in line
                for line in log.read_text().splitlines()
            )
            for log in logs
        ]
    origin.close()
    report(runs, arguments, per_process)


def switches_logged(log: str) -> int:
    """The schedule's switches a server's log tells of."""
    return sum("schedule: " in line and ": switched to " in line for line in log.splitlines())


def measure(one: str, two: str, entries: int, minutes: float) -> list[dict]:
    start = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=FIRST_AFTER_SEC)
    step = minutes * 60 / max(entries - 1, 1)
    times = [start + dt.timedelta(seconds=step * number) for number in range(entries)]
    created = []
    for number, at in enumerate(times):
        server = (one, two)[number % 2]  # the entries are made on both processes
        body = {"kind": "once", "channel_id": CHANNELS[number % 4], "at": at.isoformat()}
        answer = requests.post(f"{server}/api/admin/schedule", json=body, timeout=10)
        answer.raise_for_status()
        created.append(answer.json()["id"])
    print(f"{entries} entries, {step:.1f} s apart, the first at {times[0]:%H:%M:%S} UTC")
    while dt.datetime.now(dt.UTC) < times[-1] + dt.timedelta(seconds=10):
        time.sleep(1)
    listed = requests.get(f"{one}/api/admin/schedule", timeout=10).json()["runs"]
    return [run for run in listed if run["entry_id"] in created]


def report(runs: list[dict], arguments: argparse.Namespace, per_process: list[int]) -> None:
    lateness = sorted(run["lateness"] for run in runs if run["lateness"] is not None)
    by_entry: dict[int, int] = {}
    for run in runs:
        by_entry[run["entry_id"]] = by_entry.get(run["entry_id"], 0) + 1
    outcomes = sorted({run["outcome"] for run in runs})
    print(f"switches recorded: {len(runs)} for {arguments.entries} entries; outcomes {outcomes}")
    print(f"switches per entry: {sorted(set(by_entry.values()))} (each entry: exactly one)")
    print(f"switches made per process (server logs): {per_process}")
    if lateness:
        print(
            f"lateness: median {statistics.median(lateness) * 1000:.0f} ms, "
            f"max {lateness[-1] * 1000:.0f} ms, min {lateness[0] * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
