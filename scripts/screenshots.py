"""The README's screenshots, taken from a real ``make run`` in Chromium (Playwright), so that they
can be made again whenever the pages change:

    .venv/bin/python scripts/screenshots.py            # into docs/images/

It starts ``make run`` on a free port with a var folder of its own (your data is not touched),
makes a staff login there, and takes, as JPEGs under 200 KB:

- ``annotator.jpg``: the default video, its ball and box clicked once each and propagated, shown
  on a later frame;
- ``tv.jpg``: the viewer page playing the first demo channel;
- ``channel-admin.jpg``: the channel admin page with the demo channel selected, and the viewer
  page above still watching.

Chromium comes from Debian (``apt-get install chromium``), as for the browser tests.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from segmentation.demo_video import demo_masks  # noqa: E402
from segmentation.evaluation.clicks import first_click  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
VIEWPORT = {"width": 1280, "height": 800}
VIDEO_WIDTH, VIDEO_HEIGHT = 854, 480  # the drawn default video
SHOWN_FRAME = 60
PASSWORD = secrets.token_urlsafe(16)  # of a login that lives as long as the run
QUALITY = 80
LIMIT_BYTES = 200_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="screenshots-") as var, _MakeRun(Path(var)) as url:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM),
                args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"],
            )
            page = browser.new_page(viewport=VIEWPORT)
            _annotator(page, url, out / "annotator.jpg")
            _tv(page, url, out / "tv.jpg")
            # in a page of its own, so that the viewer page above stays one of the viewers
            _channel_admin(browser.new_page(viewport=VIEWPORT), url, out / "channel-admin.jpg")
            browser.close()
    for name in ("annotator.jpg", "tv.jpg", "channel-admin.jpg"):
        size = (out / name).stat().st_size
        print(f"{out / name}: {size / 1000:.0f} KB")
        if size > LIMIT_BYTES:
            sys.exit(f"{name} is over {LIMIT_BYTES / 1000:.0f} KB: lower QUALITY")


class _MakeRun:
    """``make run`` on a free port with its own var folder, and a staff login there."""

    def __init__(self, var: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.env = {**os.environ, "VAR_DIR": str(var), "LISTEN_PORT": str(port)}
        self.log = (var / "make-run.log").open("wb")

    def __enter__(self) -> str:
        self.process = subprocess.Popen(  # noqa: S603 (make, in this repository)
            [shutil.which("make") or "make", "run"],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/healthz", timeout=2).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.5)
        else:
            raise SystemExit(f"make run did not answer at {self.url} (log: {self.log.name})")
        created = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "createsuperuser",
                "--noinput",
                "--username=admin",
                "--email=admin@example.org",
            ],
            cwd=ROOT,
            env={**self.env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
            capture_output=True,
            text=True,
            check=False,
        )
        if created.returncode != 0:
            raise SystemExit(f"createsuperuser failed: {created.stderr}")
        return self.url

    def __exit__(self, *exc: object) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)
        self.log.close()


def _annotator(page, url: str, path: Path) -> None:
    page.goto(f"{url}/")
    page.click(".video-card:has(.badge)")
    page.wait_for_selector("#editor[data-ready=true]")
    masks = demo_masks(0)
    for number, name in enumerate(("ball", "box")):
        if number:
            page.click("#add-object")
        click = first_click(masks[name])
        box = page.locator("#overlay").bounding_box()
        with page.expect_response(lambda response: response.url.endswith("/graphql")):
            page.mouse.click(
                box["x"] + (click.x + 0.5) * box["width"] / VIDEO_WIDTH,
                box["y"] + (click.y + 0.5) * box["height"] / VIDEO_HEIGHT,
            )
    page.keyboard.press("p")
    page.wait_for_selector("#editor[data-propagated=done]", timeout=120_000)
    page.keyboard.press("g")
    page.keyboard.type(str(SHOWN_FRAME + 1))
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"() => document.getElementById('editor').dataset.frameShown === '{SHOWN_FRAME}'"
    )
    page.wait_for_timeout(500)  # the frame image and its overlay drawn
    page.screenshot(path=path, type="jpeg", quality=QUALITY)


def _tv(page, url: str, path: Path) -> None:
    chosen = requests.post(f"{url}/api/admin/channel", json={"channel_id": "demo.1"}, timeout=10)
    chosen.raise_for_status()
    page.goto(f"{url}/tv/")
    page.wait_for_function(
        """() => {
            const video = document.getElementById("player");
            return video.readyState >= 2 && video.currentTime > 2;
        }""",
        timeout=30_000,
    )
    page.screenshot(path=path, type="jpeg", quality=QUALITY)


def _channel_admin(page, url: str, path: Path) -> None:
    page.goto(f"{url}/admin/login/?next=/tv/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#channels tr")
    page.wait_for_function("() => document.getElementById('state').textContent === 'live'")
    page.screenshot(path=path, type="jpeg", quality=QUALITY)


if __name__ == "__main__":
    main()
