"""``manage.py import_videos DIR [DIR ...]``: add the video files of folders to the gallery."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from segmentation.services.videos import VIDEO_SUFFIXES, video_import
from segmentation.transcode import MediaError


class Command(BaseCommand):
    help = "Add every video file of the folders to the gallery (transcoded to H.264 MP4)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dirs", nargs="+", type=Path)

    def handle(self, *args: object, **options: object) -> None:
        files = []
        for folder in options["dirs"]:
            if not folder.is_dir():
                raise CommandError(f"{folder} is not a folder")
            files += sorted(p for p in folder.iterdir() if p.suffix.lower() in VIDEO_SUFFIXES)
        failed = 0
        for file in files:
            try:
                video = video_import(source=file)
            except MediaError as error:
                failed += 1
                self.stderr.write(f"skipped {file}: {error}")
                continue
            self.stdout.write(
                f"imported {file.name} as {video.path} "
                f"({video.width}x{video.height}, {video.frame_count} frames)"
            )
        self.stdout.write(f"{len(files) - failed} imported, {failed} skipped")
        if failed and failed == len(files):
            raise CommandError("no video could be imported")
