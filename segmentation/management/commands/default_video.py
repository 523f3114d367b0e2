"""``manage.py default_video``: make sure the default video exists (``make run`` calls it)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from segmentation.services.videos import video_default
from segmentation.transcode import MediaError


class Command(BaseCommand):
    help = "Create (or import DEFAULT_VIDEO_PATH as) the default video if it is missing."

    def handle(self, *args: object, **options: object) -> None:
        try:
            video = video_default()
        except (MediaError, OSError) as error:
            raise CommandError(f"the default video cannot be prepared: {error}") from None
        self.stdout.write(f"default video: {video.path} ({video.width}x{video.height})")
