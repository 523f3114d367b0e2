"""``evaluate_vos`` runs that tests need, started in the background as soon as the suite knows it
will run those tests, at the lowest CPU priority.

The ratchets on ../shared/data/vos are minutes of computation; most other tests wait on servers,
browsers and sockets and leave a core idle. Run at ``nice 19`` from the start of the suite, the
evaluations take that idle time instead of adding theirs at the end, and they do not slow the
tests that measure time. A test asks for its run with the marker ``evaluation(*arguments)`` and
the fixture ``evaluation`` (defined in tests/conftest.py), which waits for it and returns the
figures it wrote.

With pytest-xdist each worker collects every test, so the runs live in one folder that the
controller makes (named in ``EVALUATIONS_DIR``, which the workers inherit): the first worker to
claim a run's subfolder starts it, whichever worker runs its tests reads its figures there, and
the controller stops what is left when the session ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

WAIT = 1200  # seconds a test waits for its evaluation at most
FOLDER_VARIABLE = "EVALUATIONS_DIR"
ROOT = Path(__file__).resolve().parent.parent


class Evaluations:
    """The runs the selected tests mark, each started once for the whole session."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def for_controller(cls) -> Evaluations:
        """The session's runs, in a folder of their own, named for the workers to inherit."""
        folder = Path(tempfile.mkdtemp(prefix="evaluations-"))
        os.environ[FOLDER_VARIABLE] = str(folder)
        return cls(folder)

    @classmethod
    def for_worker(cls) -> Evaluations:
        return cls(Path(os.environ[FOLDER_VARIABLE]))

    def _run_folder(self, arguments: tuple[str, ...]) -> Path:
        return self.folder / hashlib.sha256("\0".join(arguments).encode()).hexdigest()[:16]

    def start(self, items: list[pytest.Item]) -> None:
        from tests.conftest import project_env

        for item in items:
            marker = item.get_closest_marker("evaluation")
            if marker is None or _skipped(item):
                continue
            folder = self._run_folder(marker.args)
            try:
                folder.mkdir()  # the claim: one process starts each run
            except FileExistsError:
                continue
            # One OpenBLAS thread: the classic engine's thin matrix products leave a second one
            # waiting on memory, and in the background that costs the tests CPU for nothing (the
            # 3-click run took 52 s of CPU for 39 s with one thread, 81 s for 44 s with two).
            env = project_env(folder / "var", OPENBLAS_NUM_THREADS="1")
            command = [
                "nice", "-n", "19", sys.executable, "manage.py", "evaluate_vos",
                *marker.args, "--json", str(folder / "figures.json"),
            ]  # fmt: skip
            # The exit status goes to a file that any worker can wait for; renamed into place, it
            # is never read half written.
            q = shlex.quote
            script = (
                f"{shlex.join(command)} > {q(str(folder / 'output.log'))} 2>&1; "
                f"echo $? > {q(str(folder / 'returncode.tmp'))}; "
                f"mv {q(str(folder / 'returncode.tmp'))} {q(str(folder / 'returncode'))}"
            )
            process = subprocess.Popen(
                ["sh", "-c", script], cwd=ROOT, env=env, start_new_session=True
            )
            (folder / "pid").write_text(str(process.pid))

    def figures(self, arguments: tuple[str, ...]) -> dict:
        folder = self._run_folder(arguments)
        deadline = time.monotonic() + WAIT
        while not (folder / "returncode").exists():
            assert time.monotonic() < deadline, f"evaluate_vos {arguments} ran past {WAIT} s"
            time.sleep(0.5)
        log = folder / "output.log"
        assert (folder / "returncode").read_text().strip() == "0", log.read_text()[-3000:]
        return json.loads((folder / "figures.json").read_text())

    def stop(self) -> None:
        """Stops the runs still going (their whole process groups) and removes the folder."""
        for pid_file in self.folder.glob("*/pid"):
            if (pid_file.parent / "returncode").exists():
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)


def _skipped(item: pytest.Item) -> bool:
    return any(bool(mark.args and mark.args[0]) for mark in item.iter_markers("skipif"))
