"""What clients upload: videos for the gallery, videos to share, and annotation files.

An upload is checked before anything is kept: a video's header must claim no more than the
limits, it must decode (it is transcoded to the stored format, cut to its time range) in one
of the few slots for decoding (``transcode_slots.py``), and it must fit the disk quota; an
annotation file must fit its video. A refused upload leaves nothing behind.

Past the quota (``MEDIA_QUOTA_MB``) the new upload is refused (``STORAGE_FULL``) rather than
older ones deleted to make room: uploads and shared videos are what clients made, kept under
their deletion IDs, in sessions and behind shared links, so none is dropped but by
``delete_user_data``. The frame images, a cache, make room the other way
(``frame_images.py``).

A gallery upload is stored by its content's SHA-256, which stays its ``path``; the person's own
file name, cleaned (:func:`upload_name_clean`) and numbered if the gallery shows it already
(``clip (2).mp4``), is its ``display_name``. The same content uploaded again is the same video
and keeps the name it was first given: renaming it would relabel a video others have open.
"""

from __future__ import annotations

import math
import re
import shutil
import threading
import unicodedata
import uuid
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction

from core.malloc import memory_return
from segmentation.annotation_check import frames_check
from segmentation.annotation_json import annotations_parse
from segmentation.errors import BadUserInput, StorageFull, UnsupportedMedia, VideoNotFound
from segmentation.models import DISPLAY_NAME_MAX, Annotation, DeletionId, Video
from segmentation.selectors import gallery_name_free, videos_at
from segmentation.services.session_types import Annotations
from segmentation.services.transcode_slots import transcode_slots
from segmentation.services.videos import media_path, video_register
from segmentation.transcode import (
    Limits,
    MediaError,
    header_check,
    probe,
    sha256_of,
    transcode,
)

UPLOADS_DIR = "uploads"
SHARED_DIR = "shared"
# Nothing arrived: said as such, since "not a readable video" sends people to check a file
# that was never read (an interrupted copy, a file picked before it was written).
EMPTY_FILE = "the file is empty"

_STORING = threading.Lock()
NAME_WHEN_EMPTY = "video"
LONGEST_EXTENSION = 16  # past this, a "suffix" is part of the name, and is cut with it
NAME_TRIES = 5  # uploads racing for one name: each loss moves on to the next free number
# Invisible characters that can make a name read as another (U+202E turns "gpj.mp4" around);
# the joiners inside emoji sequences are kept.
_KEPT_FORMAT_CHARACTERS = {"\u200c", "\u200d"}


def video_upload(
    *,
    file: UploadedFile,
    start: float | None = None,
    duration: float | None = None,
    deletion_id: DeletionId | None = None,
) -> Video:
    """Store an uploaded video as ``uploads/<sha256>.mp4`` (H.264, 24 fps, capped length)."""
    start = 0.0 if start is None else start
    limit = float(settings.MAX_UPLOAD_DURATION_SEC)
    duration = limit if duration is None else duration
    if not math.isfinite(start) or start < 0:
        raise BadUserInput(f"startTimeSec must be a non-negative number, got {start}")
    if not math.isfinite(duration) or duration <= 0:
        raise BadUserInput(f"durationTimeSec must be a positive number, got {duration}")
    _quota_check(adding=0)
    if file.size == 0:
        raise UnsupportedMedia(EMPTY_FILE)
    source = _local_path(file)
    partial = media_path(f"{UPLOADS_DIR}/.{uuid.uuid4().hex}.partial")
    try:
        header_check(source, _limits(), label=file.name)
        slots = transcode_slots()
        with slots.held():
            transcode(
                source,
                partial,
                max_side=settings.MAX_VIDEO_SIDE,
                start=start,
                duration=min(duration, limit),
                label=file.name,
                limits=_limits(),
                threads=slots.threads_each,
            )
        destination = media_path(f"{UPLOADS_DIR}/{sha256_of(partial)}.mp4")
        _keep(partial, destination)
    except MediaError as error:
        raise UnsupportedMedia(str(error)) from None
    finally:
        partial.unlink(missing_ok=True)  # still there only if something failed
        _release(file, source)
        memory_return()  # the decoder's buffers, back to the system
    video = video_register(path=destination, origin=Video.Origin.UPLOAD, deletion_id=deletion_id)
    return video_name_give(video=video, file_name=file.name or "")


def upload_name_clean(*, name: str) -> str:
    """A client's file name as a display name: its last path part (``/`` or ``\\``), Unicode
    in NFC, whitespace runs as one space, control and invisible format characters dropped, at
    most :data:`DISPLAY_NAME_MAX` characters (the extension kept), ``video`` if nothing is left.
    """
    name = unicodedata.normalize("NFC", name.replace("\\", "/").rsplit("/", 1)[-1])
    name = re.sub(r"\s+", " ", name)
    name = "".join(
        character
        for character in name
        if not unicodedata.category(character).startswith("C")
        or character in _KEPT_FORMAT_CHARACTERS
    ).strip()
    if name in ("", ".", ".."):
        return NAME_WHEN_EMPTY
    suffix = PurePosixPath(name).suffix
    if len(suffix) > LONGEST_EXTENSION:
        suffix = ""
    stem = name[: len(name) - len(suffix)]
    return stem[: DISPLAY_NAME_MAX - len(suffix)].rstrip() + suffix


def video_name_give(*, video: Video, file_name: str) -> Video:
    """Name an uploaded video after its file, unless it has a name already (the same content
    uploaded before keeps its first one)."""
    wanted = upload_name_clean(name=file_name)
    for _ in range(NAME_TRIES):
        if video.display_name:
            return video
        name = gallery_name_free(wanted=wanted, limit=DISPLAY_NAME_MAX)
        try:
            with transaction.atomic():
                # Only while unnamed: a concurrent upload of the same content may have named it.
                Video.objects.filter(pk=video.pk, display_name="").update(display_name=name)
        except IntegrityError:  # another upload took the name in the meantime
            pass
        video.refresh_from_db(fields=["display_name"])
    return video


def shared_video_upload(*, file: UploadedFile, deletion_id: DeletionId | None = None) -> Video:
    """Keep a video (as sent, once it is known to decode) under ``shared/<sha256>.mp4``."""
    _quota_check(adding=0)
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
            _keep(partial, destination)
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


def _keep(partial: Path, destination: Path) -> None:
    """Move a finished file into place, if the quota has room for it (checked and taken at
    once: two uploads finishing together cannot both take the last of it)."""
    with _STORING:
        if not destination.exists():  # the same content again takes no more room
            _quota_check(adding=partial.stat().st_size)
        partial.replace(destination)


def _quota_check(*, adding: int) -> None:
    """:class:`StorageFull` if the stored uploads and shared videos, with ``adding`` bytes
    more, would be over ``MEDIA_QUOTA_MB``."""
    used = sum(
        file.stat().st_size
        for folder in (UPLOADS_DIR, SHARED_DIR)
        for file in media_path(folder).glob("*.mp4")
    )
    quota = settings.MEDIA_QUOTA_BYTES
    if used + adding > quota or (adding == 0 and used >= quota):
        raise StorageFull(
            f"the uploads take {used / 2**20:.1f} MB of their {quota / 2**20:.0f} MB; "
            "delete some (manage.py delete_user_data) or raise MEDIA_QUOTA_MB"
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
