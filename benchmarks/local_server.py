"""The real server (daphne, as ``make run`` starts it) on a free loopback port, over a throwaway
VAR_DIR holding the drawn default video, for benchmark scripts."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_SEC = 30


def manage(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(  # noqa: S603 (our own interpreter and manage.py)
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return done.stdout


@dataclass(frozen=True)
class Served:
    base_url: str
    var_dir: Path
    pid: int

    def rss_mb(self) -> float:
        """The server process's resident memory now."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS line")


@contextlib.contextmanager
def served(**env_overrides: str) -> Iterator[Served]:
    """The running server (its base URL, VAR_DIR and process); stopped on exit."""
    with tempfile.TemporaryDirectory() as work:
        env = {**os.environ, "VAR_DIR": work, "LOG_LEVEL": "INFO", **env_overrides}
        env.pop("DATABASE_URL", None)
        manage("migrate", "--noinput", env=env)
        manage("default_video", env=env)
        log = Path(work) / "daphne.log"
        with log.open("w") as out:
            server = subprocess.Popen(
                [sys.executable, "-m", "config.server", "-p", "0", "config.asgi:application"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            yield Served(_base_url(log), Path(work), server.pid)
        finally:
            server.terminate()
            server.wait(timeout=10)


def _base_url(log: Path) -> str:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SEC
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if "Listening on TCP address" in line:
                return "http://" + line.rsplit(" ", 1)[1]
        time.sleep(0.1)
    raise SystemExit(log.read_text())
