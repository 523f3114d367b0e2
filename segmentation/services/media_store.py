"""Where the uploads are kept, and the disk quota they share: the stored uploads
(``uploads/<sha256>.mp4``), the shared videos (``shared/``) and the files of uploads being
prepared (``uploads/.preparing/<id>.source``).

Past the quota (``MEDIA_QUOTA_MB``) a new upload is refused (``STORAGE_FULL``) rather than older
ones deleted to make room: uploads and shared videos are what clients made, kept under their
deletion IDs, in sessions and behind shared links, so none is dropped but by
``delete_user_data``. The frame images, a cache, make room the other way (``frame_images.py``).
"""

from __future__ import annotations

import threading
from pathlib import Path

from django.conf import settings

from segmentation.errors import StorageFull
from segmentation.services.videos import media_path

UPLOADS_DIR = "uploads"
SHARED_DIR = "shared"
PREPARING_DIR = f"{UPLOADS_DIR}/.preparing"
SOURCE_SUFFIX = ".source"
_STORING = threading.Lock()


def media_keep(*, partial: Path, destination: Path) -> None:
    """Move a finished file into place, if the quota has room for it (checked and taken at
    once: two uploads finishing together cannot both take the last of it)."""
    with _STORING:
        if not destination.exists():  # the same content again takes no more room
            media_quota_check(adding=partial.stat().st_size)
        partial.replace(destination)


def media_quota_check(*, adding: int) -> None:
    """:class:`StorageFull` if the stored uploads, the shared videos and the files of uploads
    being prepared, with ``adding`` bytes more, would be over ``MEDIA_QUOTA_MB``."""
    used = sum(
        file.stat().st_size
        for folder, pattern in (
            (UPLOADS_DIR, "*.mp4"),
            (SHARED_DIR, "*.mp4"),
            (PREPARING_DIR, f"*{SOURCE_SUFFIX}"),
        )
        for file in media_path(folder).glob(pattern)
    )
    quota = settings.MEDIA_QUOTA_BYTES
    if used + adding > quota or (adding == 0 and used >= quota):
        raise StorageFull(
            f"the uploads take {used / 2**20:.1f} MB of their {quota / 2**20:.0f} MB; "
            "delete some (manage.py delete_user_data) or raise MEDIA_QUOTA_MB"
        )
