"""The real server (daphne, as ``make run`` starts it) on a free loopback port, over a throwaway
VAR_DIR holding the drawn default video, for benchmark scripts."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LOOPBACK_UPSTREAMS = "127.0.0.0/8,::1"  # CHANNELS_UPSTREAM_ALLOW for a local upstream

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
    worker_pids: tuple[int, ...] = ()

    def rss_mb(self) -> float:
        """The server process's resident memory now."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS line")

    def kill(self) -> None:
        """SIGKILL the server process, as a crash or the OOM killer would: nothing of it runs
        after this returns (a later ``served`` on the same ``var_dir`` is its restart)."""
        os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


@contextlib.contextmanager
def served(
    *,
    workers: int = 0,
    var_dir: Path | None = None,
    startup_timeout: float = STARTUP_TIMEOUT_SEC,
    **env_overrides: str,
) -> Iterator[Served]:
    """The running server (its base URL, VAR_DIR and process); stopped on exit. With
    ``workers``, that many inference workers (``manage.py segmentation_worker``) hold the
    sessions, found through Redis at ``REDIS_URL`` (default: this machine's). With ``var_dir``,
    the server runs on that folder, which is kept (another ``served`` on it is a restart of the
    same server: its database, uploads and stored work); else on a throwaway one."""
    with contextlib.ExitStack() as stack:
        work = str(var_dir) if var_dir else stack.enter_context(tempfile.TemporaryDirectory())
        env = {**os.environ, "VAR_DIR": work, "LOG_LEVEL": "INFO", **env_overrides}
        # the benchmarks' upstreams run on this machine, which the hub refuses by default
        env.setdefault("CHANNELS_UPSTREAM_ALLOW", LOOPBACK_UPSTREAMS)
        env.pop("DATABASE_URL", None)
        if workers:
            env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
            env["SEGMENTATION_WORKERS"] = "1"
            env["SEGMENTATION_WORKERS_PREFIX"] = f"bench-{os.getpid()}-{time.monotonic_ns()}"
        manage("migrate", "--noinput", env=env)
        manage("default_video", env=env)
        started = []
        try:
            for number in range(workers):
                command = ["manage.py", "segmentation_worker", "--name", f"w{number}"]
                started.append(_start(command, env, Path(work) / f"worker{number}.log"))
            for number in range(workers):
                _wait_for(
                    "segmentation worker", Path(work) / f"worker{number}.log", startup_timeout
                )
            log = _fresh(Path(work) / "daphne.log")  # a restart keeps the last one's log
            server = _start(["-m", "edge.server", "-p", "0", "config.asgi:application"], env, log)
            started.append(server)
            workers_started = tuple(process.pid for process in started[:-1])
            base_url = _base_url(log, startup_timeout)
            yield Served(base_url, Path(work), server.pid, workers_started)
        finally:
            for process in started:
                process.terminate()
            for process in started:
                process.wait(timeout=30)


def _start(arguments: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(  # noqa: S603 (our own interpreter and modules)
            [sys.executable, *arguments], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )


def _fresh(path: Path) -> Path:
    """``path``, or the first of ``<stem>-2<suffix>``, ``-3``... not taken."""
    number = 1
    while path.exists():
        number += 1
        path = path.with_name(f"{path.stem.split('-')[0]}-{number}{path.suffix}")
    return path


def _wait_for(text: str, log: Path, timeout: float = STARTUP_TIMEOUT_SEC) -> str:
    """The first line of ``log`` holding ``text``, waiting for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if text in line:
                return line
        time.sleep(0.1)
    raise SystemExit(log.read_text())


def _base_url(log: Path, timeout: float = STARTUP_TIMEOUT_SEC) -> str:
    return "http://" + _wait_for("Listening on TCP address", log, timeout).rsplit(" ", 1)[1]
