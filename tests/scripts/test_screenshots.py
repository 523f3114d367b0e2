"""scripts/screenshots.py against a real `make run`: the README's three pictures, each a JPEG
under the size the README can carry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from tests.conftest import CHROMIUM, ROOT


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Chromium is not installed at {CHROMIUM}")
def test_the_screenshots_are_taken_from_a_fresh_make_run(tmp_path: Path) -> None:
    taken = subprocess.run(
        [sys.executable, "scripts/screenshots.py", "--out", str(tmp_path)],
        cwd=ROOT,
        # its `make run` keeps the bytecode it compiles, as the tests' servers do (project_env)
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert taken.returncode == 0, taken.stderr
    names = ["annotator.jpg", "channel-admin.jpg", "tv.jpg"]
    assert sorted(path.name for path in tmp_path.iterdir()) == names
    for name in names:
        picture = Image.open(tmp_path / name)
        assert (picture.format, picture.size) == ("JPEG", (1280, 800)), name
        assert (tmp_path / name).stat().st_size < 200_000, name
