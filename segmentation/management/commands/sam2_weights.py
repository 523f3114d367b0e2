"""``manage.py sam2_weights``: list the official SAM 2 and EdgeTAM checkpoints, and fetch one into
the models folder (``SAM2_MODELS_DIR``, default ``var/models/``), where ``SAM2_CHECKPOINT=tiny``
(or ``edgetam``) finds it; or put one fetched some other way there (``--file``), verified the
same. A fetch that cannot get the file says what to do next: resume (only where bytes were
kept), another address, or ``--file`` and where the file will be kept."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from segmentation.engines.sam2.catalogue import (
    SIZES,
    SOURCES,
    VERSIONS,
    OfficialCheckpoint,
    official_find,
)
from segmentation.services.sam2_weights import (
    DownloadFailed,
    WeightsError,
    weights_fetch,
    weights_list,
    weights_place,
)


class Command(BaseCommand):
    help = "List the official SAM 2 and EdgeTAM checkpoints, or fetch one into SAM2_MODELS_DIR."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="the official files, their sizes, and which are here")
        fetch = actions.add_parser("fetch", help="download one, verified, resuming a stopped one")
        fetch.add_argument("size", choices=SIZES)
        fetch.add_argument("--version", choices=VERSIONS, default="2.1")
        fetch.add_argument("--source", choices=SOURCES, default="meta")
        where = fetch.add_mutually_exclusive_group()
        where.add_argument("--url", help="a mirror of the file (checked against the same SHA-256)")
        where.add_argument(
            "--file",
            help="the file, fetched some other way (a browser, another machine): copied into the"
            " models folder once it is checked as a download is",
        )
        fetch.add_argument("--sha256", help="the SHA-256 to expect instead of the official file's")

    def handle(self, *args: object, **options: object) -> None:
        if options["action"] == "list":
            self._list()
        else:
            self._fetch(options)

    def _list(self) -> None:
        self.stdout.write(f"models folder: {settings.SAM2_MODELS_DIR}")
        for row in weights_list(models_dir=settings.SAM2_MODELS_DIR):
            checkpoint = row.checkpoint
            if row.present:
                state = "present"
            elif row.partial_bytes:
                state = f"partial ({row.partial_bytes / 1e6:.1f} MB, fetch resumes it)"
            else:
                state = "-"
            self.stdout.write(
                f"{checkpoint.version:4} {checkpoint.size:10} {checkpoint.file_name:26}"
                f" {checkpoint.bytes / 1e6:7.1f} MB  {state}"
            )

    def _fetch(self, options: dict[str, object]) -> None:
        checkpoint = official_find(str(options["size"]), str(options["version"]))
        url = str(options["url"] or checkpoint.url(str(options["source"])))
        destination = settings.SAM2_MODELS_DIR / checkpoint.file_name
        sha256 = str(options["sha256"] or checkpoint.sha256)
        if destination.is_file():
            self.stdout.write(f"{destination} is already here")
            return
        progress = _ProgressLine(sys.stderr)
        try:
            if options["file"]:
                source = Path(str(options["file"])).expanduser()
                weights_place(source=source, destination=destination, sha256=sha256)
            else:
                self.stdout.write(f"fetching {url}")
                weights_fetch(
                    url=url,
                    destination=destination,
                    sha256=sha256,
                    progress=progress,
                )
        except DownloadFailed as error:
            progress.end()
            steps = _next_steps(error, checkpoint, options, destination, sha256)
            raise CommandError(f"{error}.\n{steps}") from None
        except WeightsError as error:
            progress.end()
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"{destination}: verified; use it with SEGMENTATION_ENGINE=sam2"
            f" SAM2_CHECKPOINT={checkpoint.setting}"
        )


def _next_steps(
    error: DownloadFailed,
    checkpoint: OfficialCheckpoint,
    options: dict[str, object],
    destination: Path,
    sha256: str,
) -> str:
    """What a person can do when the file could not be fetched: run it again only where bytes
    were kept (with nothing kept, the same try is no nearer), another address, or the file
    fetched some other way, given with ``--file``."""
    name = checkpoint.file_name
    source = str(options["source"])
    steps = []
    if error.kept_bytes:
        steps.append("run the same command again: it resumes from the bytes kept")
    else:
        steps.append("behind a proxy, set HTTPS_PROXY (and HTTP_PROXY) and run it again")
    resumes = ", resuming from the bytes kept" if error.kept_bytes else ""
    if options["url"]:  # --url wins over --source
        others = " or ".join(f"--source {s}" for s in SOURCES)
        steps.append(
            f"fetch from an official address instead{resumes}: leave out --url ({others});"
            f" or --url with another mirror of {name}"
        )
    else:
        sources = ", ".join(f"--source {s}" for s in SOURCES if s != source)
        steps.append(f"fetch from another address{resumes}: {sources}, or --url with a mirror")
    steps.append(
        f"or download {name} some other way ({checkpoint.url(source)} in a browser, or on"
        " another machine) and give it with --file PATH: it is checked against its SHA-256"
        f" ({sha256}) and loaded as a checkpoint, then kept as {destination}"
    )
    return "What next:\n" + "\n".join(f"- {step}" for step in steps)


class _ProgressLine:
    """A progress line rewritten in place, at most ten times a second."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.shown, self.started = stream, 0.0, time.monotonic()
        self.first: int | None = None
        self.open = False  # a line is shown and not ended

    def __call__(self, have: int, total: int | None) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = have
        if now - self.shown < 0.1 and have != total:
            return
        self.shown = now
        rate = (have - self.first) / max(now - self.started, 1e-6) / 1e6
        done = f"{have / 1e6:.1f}" + (f" / {total / 1e6:.1f} MB" if total else " MB")
        share = f"{100 * have / total:5.1f}% " if total else ""
        self.stream.write(f"\r{share}{done}  {rate:.1f} MB/s")
        self.open = have != total
        if not self.open:
            self.stream.write("\n")
        self.stream.flush()

    def end(self) -> None:
        """End a line left open by a download that stopped, so that what follows starts on a
        line of its own."""
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False
