"""What clients upload: videos for the gallery, videos to share, and annotation files.

An upload is checked before anything is kept: a video's header must claim no more than the
limits and it must fit the disk quota (``media_store.py``); an annotation file must fit its
video. A refused upload leaves nothing behind.

A gallery video is prepared in the background (``preparations.py``): ``uploadVideo`` waits for
it, ``POST /uploads`` does not. It is stored by its content's SHA-256, which stays its
``path``; the person's own file name is its ``display_name`` (``upload_names.py``). A shared
video is kept as sent, once it is known to decode, in one of the few slots for decoding
(``transcode_slots.py``).
"""

from __future__ import annotations

import math
import shutil
import threading
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from core.malloc import memory_return
from segmentation.annotation_check import frames_check
from segmentation.annotation_json import annotations_parse
from segmentation.errors import BadUserInput, UnsupportedMedia, VideoNotFound
from segmentation.models import Annotation, DeletionId, Video, VideoPreparation
from segmentation.selectors import videos_at
from segmentation.services.media_store import (
    SHARED_DIR,
    UPLOADS_DIR,
    media_keep,
    media_quota_check,
)
from segmentation.services.preparations import (
    EMPTY_FILE,
    Owner,
    preparation_run,
    preparation_start,
)
from segmentation.services.session_types import Annotations
from segmentation.services.transcode_slots import transcode_slots
from segmentation.services.videos import media_path, video_register
from segmentation.transcode import Limits, MediaError, header_check, probe, sha256_of


def video_upload(
    *,
    file: UploadedFile,
    owner: Owner,
    start: float | None = None,
    duration: float | None = None,
) -> Video:
    """Store an uploaded video as ``uploads/<sha256>.mp4`` (H.264, 24 fps, capped length),
    once it is prepared: the SAM 2 API's ``uploadVideo``, which answers with a ready video."""
    preparation = video_upload_start(file=file, owner=owner, start=start, duration=duration)
    try:
        return preparation_run(preparation_id=preparation.pk, keep_failure=False)
    finally:
        memory_return()


def video_upload_start(
    *,
    file: UploadedFile,
    owner: Owner,
    start: float | None = None,
    duration: float | None = None,
) -> VideoPreparation:
    """An uploaded video admitted for preparation, checked as :func:`video_upload` checks it;
    its preparation, queued."""
    start = 0.0 if start is None else start
    limit = float(settings.MAX_UPLOAD_DURATION_SEC)
    duration = limit if duration is None else duration
    if not math.isfinite(start) or start < 0:
        raise BadUserInput(f"startTimeSec must be a non-negative number, got {start}")
    if not math.isfinite(duration) or duration <= 0:
        raise BadUserInput(f"durationTimeSec must be a positive number, got {duration}")
    return preparation_start(file=file, start=start, duration=min(duration, limit), owner=owner)


def shared_video_upload(*, file: UploadedFile, deletion_id: DeletionId | None = None) -> Video:
    """Keep a video (as sent, once it is known to decode) under ``shared/<sha256>.mp4``."""
    media_quota_check(adding=0)
    if file.size == 0:
        raise UnsupportedMedia(EMPTY_FILE)
    source = _local_path(file)
    partial = media_path(f"{SHARED_DIR}/.{uuid.uuid4().hex}.partial")
    try:
        header_check(source, _limits(), label=file.name)
        # Kept as sent, so probing it and drawing its poster decode a picture of up to the
        # limits: in a slot, as a transcode.
        with transcode_slots().held():
            probe(source, label=file.name)
            destination = media_path(f"{SHARED_DIR}/{sha256_of(source)}.mp4")
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, partial)
            media_keep(partial=partial, destination=destination)
            return video_register(
                path=destination, origin=Video.Origin.SHARED, deletion_id=deletion_id
            )
    except MediaError as error:
        raise UnsupportedMedia(str(error)) from None
    finally:
        partial.unlink(missing_ok=True)
        _release(file, source)
        memory_return()


def annotations_upload(*, file: UploadedFile, deletion_id: DeletionId | None = None) -> Annotation:
    """Validate an annotation file against its video and keep it."""
    if file.size == 0:
        raise BadUserInput(EMPTY_FILE)
    cap = settings.MAX_ANNOTATIONS_BYTES
    # read no more than the cap and a byte: a larger file is refused by its size alone
    data = annotations_parse(
        file.read(cap + 1),
        max_bytes=cap,
        label=f"the annotation file {file.name}",
        not_json=f"{file.name} is not a JSON annotation file",
    )
    video = annotations_check(data)
    with transaction.atomic():
        return Annotation.objects.create(video=video, data=data, deletion_id=deletion_id)


def annotations_read(
    data: object, *, video: Video | None = None, stop: threading.Event | None = None
) -> Annotations:
    """An annotation file's data, checked as :func:`annotations_check` checks it."""
    annotations_check(data, video=video, stop=stop)
    return Annotations.from_message(data)


def annotations_video(data: object) -> Video:
    """The video an annotation file is of, the first thing :func:`annotations_check` checks:
    the one part of it that reads the database."""
    if not isinstance(data, dict) or not isinstance(data.get("video"), str):
        raise BadUserInput('annotations must be {"video": "<path>", "frames": [...]}')
    video = videos_at(path=data["video"]).first()
    if video is None:
        raise VideoNotFound(f"the annotations are of an unknown video {data['video']!r}")
    return video


def annotations_check(
    data: object, *, video: Video | None = None, stop: threading.Event | None = None
) -> Video:
    """The video the annotations are of; :class:`BadUserInput` naming the first fault. Given
    the ``video`` (:func:`annotations_video` of ``data``), it reads no database, and may run in
    a thread of its own; it raises :class:`Stopped` between masks once ``stop`` is set (the
    client went away)."""
    if video is None or not isinstance(data, dict):
        video = annotations_video(data)  # refuses anything but a dict
    frames_check(data, video=video.shape, stop=stop)
    return video


def _limits() -> Limits:
    return Limits(
        max_pixels=settings.MAX_UPLOAD_PIXELS, max_pixel_rate=settings.MAX_UPLOAD_PIXEL_RATE
    )


def _local_path(file: UploadedFile) -> Path:
    """A path to the upload's bytes: its temporary file, or one written now for a small upload."""
    path = getattr(file, "temporary_file_path", None)
    if path is not None:
        return Path(path())
    spill = media_path(f"{UPLOADS_DIR}/.{uuid.uuid4().hex}.incoming")
    spill.parent.mkdir(parents=True, exist_ok=True)
    with spill.open("wb") as writer:
        for chunk in file.chunks():
            writer.write(chunk)
    return spill


def _release(file: UploadedFile, source: Path) -> None:
    """Delete the copy :func:`_local_path` made (Django removes its own temporary files)."""
    if getattr(file, "temporary_file_path", None) is None:
        source.unlink(missing_ok=True)
