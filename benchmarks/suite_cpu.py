"""Where a command's CPU goes (``make test`` by default), by kind of process.

    .venv/bin/python benchmarks/suite_cpu.py [--every 1.0] [-- COMMAND ...]

Runs the command and samples every process on the machine from ``/proc`` each ``--every``
seconds while it runs. Each process is filed by its command line: a test server, a pytest
worker, Chromium, a ``manage.py`` command by name... A process that started after the command
counts all the CPU it used; one running before it (a database, other work on the machine)
counts what it used since, under its own name. One that ends between two samples loses what it
used since the last, so the figures are a floor.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def kind(pid: str) -> str | None:
    """What the process ``pid`` is, by its command line; None once it is gone."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        if not words[0]:  # a kernel thread
            return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    line = " ".join(words)
    if "edge.server" in line:
        return "test server"
    if "evaluate_vos" in line:
        return "evaluate_vos"
    manage = [i for i, word in enumerate(words[:3]) if word.endswith("manage.py")]
    if manage:
        return " ".join(["manage.py", *words[manage[0] + 1 : manage[0] + 2]]).strip()
    if "chrom" in line:
        return "chromium"
    if "exec(eval(sys.stdin" in line:
        return "pytest worker"
    if "pytest" in line:
        return "pytest"
    if "core.processes" in line:
        return "export child"
    return Path(words[0]).name or "?"


def cpu_seconds(pid: str) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("command", nargs="*", default=["make", "test"])
    args = parser.parse_args()

    seen: dict[str, tuple[str, float]] = {}  # pid: its kind, its CPU at the last sample
    totals: collections.Counter[str] = collections.Counter()
    own = str(os.getpid())

    def sample(*, baseline: bool = False) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == own:
                continue
            used = cpu_seconds(pid)
            if used is None:
                continue
            if pid not in seen:
                name = kind(pid)
                if name is None:
                    continue
                seen[pid] = (name, used if baseline else 0.0)
            name, before = seen[pid]
            totals[name] += used - before
            seen[pid] = (name, used)

    sample(baseline=True)  # what ran before counts from here
    started = time.monotonic()
    command = subprocess.Popen(args.command)  # noqa: S603 (the command asked for)
    while command.poll() is None:
        sample()
        time.sleep(args.every)
    sample()
    wall = time.monotonic() - started

    print(f"{' '.join(args.command)}: exit {command.returncode}, {wall:.0f} s")
    print(f"CPU seconds, {sum(totals.values()):.0f} in all, by kind of process:")
    for name, seconds in totals.most_common():
        if seconds >= 1:
            print(f"{seconds:9.1f}  {name}")


if __name__ == "__main__":
    main()
