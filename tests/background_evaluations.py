"""``evaluate_vos`` runs that tests need, started in the background as soon as the suite knows it
will run those tests, at the lowest CPU priority.

The ratchets on ../shared/data/vos are minutes of computation; most other tests wait on servers,
browsers and sockets and leave a core idle. Run at ``nice 19`` from the start of the suite, the
evaluations take that idle time instead of adding theirs at the end, and they do not slow the
tests that measure time. A test asks for its run with the marker ``evaluation(*arguments)`` and
the fixture ``evaluation`` (defined in tests/conftest.py), which waits for it and returns the
figures it wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

WAIT = 1200  # seconds a test waits for its evaluation at most


class Evaluation:
    """One ``evaluate_vos`` run in the background, writing its figures to a JSON file."""

    def __init__(self, arguments: tuple[str, ...], folder: Path, env: dict[str, str]) -> None:
        self.arguments = arguments
        self.out = folder / "figures.json"
        self.log = folder / "output.log"
        command = ["nice", "-n", "19", sys.executable, "manage.py", "evaluate_vos"]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, *arguments, "--json", str(self.out)],
                cwd=Path(__file__).resolve().parent.parent,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def figures(self) -> dict:
        returncode = self.process.wait(timeout=WAIT)
        assert returncode == 0, self.log.read_text()[-3000:]
        return json.loads(self.out.read_text())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Evaluations:
    """The runs the selected tests mark, started once each."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="evaluations-")
        self._runs: dict[tuple[str, ...], Evaluation] = {}

    def start(self, items: list[pytest.Item]) -> None:
        from tests.conftest import project_env

        for item in items:
            marker = item.get_closest_marker("evaluation")
            if marker is None or marker.args in self._runs or _skipped(item):
                continue
            folder = Path(self._folder.name) / str(len(self._runs))
            folder.mkdir()
            env = project_env(folder / "var")
            self._runs[marker.args] = Evaluation(marker.args, folder, env)

    def figures(self, arguments: tuple[str, ...]) -> dict:
        return self._runs[arguments].figures()

    def stop(self) -> None:
        for run in self._runs.values():
            run.stop()
        self._folder.cleanup()


def _skipped(item: pytest.Item) -> bool:
    return any(bool(mark.args and mark.args[0]) for mark in item.iter_markers("skipif"))
