"""Videos in the library: registered from files under ``MEDIA_ROOT``, imported into the gallery,
and the default video every fresh machine has.

Layout under ``MEDIA_ROOT``: ``gallery/`` (imported and default videos), ``uploads/<sha256>.mp4``,
``shared/``, and ``posters/<sha256>.jpg`` (frame 0 of each video).
"""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from segmentation.demo_video import demo_video_write
from segmentation.models import DeletionId, Video
from segmentation.transcode import VideoInfo, poster, probe, sha256_of, transcode

GALLERY_DIR = "gallery"
POSTERS_DIR = "posters"
DEFAULT_VIDEO_NAME = "default.mp4"
VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".mkv", ".webm", ".avi", ".ts")


def media_path(relative: str) -> Path:
    return Path(settings.MEDIA_ROOT) / relative


def video_register(
    *,
    path: Path,
    origin: str,
    deletion_id: DeletionId | None = None,
    info: VideoInfo | None = None,
    sha256: str | None = None,
) -> Video:
    """The library's row for a video file under ``MEDIA_ROOT`` (probed, with a poster), or
    with the ``info``, ``sha256`` and poster a preparation's process made already."""
    info = probe(path) if info is None else info
    digest = sha256_of(path) if sha256 is None else sha256
    poster_relative = f"{POSTERS_DIR}/{digest}.jpg"
    if not media_path(poster_relative).exists():
        poster(path, media_path(poster_relative))
    fields = {
        "poster_path": poster_relative,
        "width": info.width,
        "height": info.height,
        "fps": info.fps,
        "frame_count": info.frame_count,
        "duration": info.duration,
        "sha256": digest,
        "origin": origin,
        "deletion_id": deletion_id,
    }
    relative = path.resolve().relative_to(Path(settings.MEDIA_ROOT).resolve()).as_posix()
    try:
        with transaction.atomic():
            video, _ = Video.objects.update_or_create(path=relative, defaults=fields)
    except IntegrityError:  # another process registered it at the same moment
        video = Video.objects.get(path=relative)
    return video


def video_import(*, source: Path) -> Video:
    """Add a video file to the gallery, transcoded to the stored format (once per name)."""
    name = _safe_name(source.stem) + ".mp4"
    relative = f"{GALLERY_DIR}/{name}"
    existing = Video.objects.filter(path=relative).first()
    if existing is not None and media_path(relative).exists():
        return existing
    destination = media_path(relative)
    partial = destination.with_name(f".{destination.name}.partial")
    transcode(source, partial, max_side=settings.MAX_VIDEO_SIDE)
    partial.replace(destination)
    return video_register(path=destination, origin=Video.Origin.GALLERY)


def video_default() -> Video:
    """``DEFAULT_VIDEO_PATH`` imported into the gallery, or else a video drawn here."""
    if settings.DEFAULT_VIDEO_PATH:
        return video_import(source=Path(settings.DEFAULT_VIDEO_PATH))
    relative = f"{GALLERY_DIR}/{DEFAULT_VIDEO_NAME}"
    destination = media_path(relative)
    if not destination.exists():
        demo_video_write(destination)
    existing = Video.objects.filter(path=relative).first()
    return existing or video_register(path=destination, origin=Video.Origin.GALLERY)


def _safe_name(stem: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip(".-")
    return name or "video"
