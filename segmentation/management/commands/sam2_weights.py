"""``manage.py sam2_weights``: list the official SAM 2 and EdgeTAM checkpoints, and fetch one into
the models folder (``SAM2_MODELS_DIR``, default ``var/models/``), where ``SAM2_CHECKPOINT=tiny``
(or ``edgetam``) finds it."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from segmentation.engines.sam2.catalogue import SIZES, SOURCES, VERSIONS, official_find
from segmentation.services.sam2_weights import WeightsError, weights_fetch, weights_list


class Command(BaseCommand):
    help = "List the official SAM 2 and EdgeTAM checkpoints, or fetch one into SAM2_MODELS_DIR."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="the official files, their sizes, and which are here")
        fetch = actions.add_parser("fetch", help="download one, verified, resuming a stopped one")
        fetch.add_argument("size", choices=SIZES)
        fetch.add_argument("--version", choices=VERSIONS, default="2.1")
        fetch.add_argument("--source", choices=SOURCES, default="meta")
        fetch.add_argument("--url", help="a mirror of the file (checked against the same SHA-256)")
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
        if destination.is_file():
            self.stdout.write(f"{destination} is already here")
            return
        self.stdout.write(f"fetching {url}")
        try:
            weights_fetch(
                url=url,
                destination=destination,
                sha256=str(options["sha256"] or checkpoint.sha256),
                progress=_ProgressLine(sys.stderr),
            )
        except WeightsError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"{destination}: verified; use it with SEGMENTATION_ENGINE=sam2"
            f" SAM2_CHECKPOINT={checkpoint.setting}"
        )


class _ProgressLine:
    """A progress line rewritten in place, at most ten times a second."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.shown, self.started = stream, 0.0, time.monotonic()
        self.first: int | None = None

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
        if have == total:
            self.stream.write("\n")
        self.stream.flush()
