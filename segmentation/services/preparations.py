"""Uploaded videos prepared in the background: admitted, made into the stored format in a process
of their own, followed by their owner's gallery, cancelled, failed with a reason, and taken up
again after a restart.

- **Admitted** (:func:`preparation_start`): a video's header is checked (no frame decoded), the
  disk quota must hold its file, and at most ``MAX_PARALLEL_TRANSCODES`` +
  ``MAX_QUEUED_TRANSCODES`` preparations are unfinished at once, ``UPLOADS_PER_CLIENT`` of them
  a client's (its address); past either, ``SERVER_BUSY``, having kept nothing. Its file is kept
  under ``uploads/.preparing/<id>.source`` and a :class:`VideoPreparation` row says where it
  stands.
- **Prepared** (:func:`preparation_run`, by the request's thread for GraphQL's ``uploadVideo``,
  which answers once it is ready, or by a thread of its own for ``POST /uploads``): in one of
  ``MAX_PARALLEL_TRANSCODES`` child processes (``core/processes.py``: niceness 10, at most
  ``PREPARATION_MEMORY_MB``, the cores shared between them as ``transcode_slots.py`` shares
  them), the others waiting in the order they came. The child remuxes or transcodes
  (``video_preparation.py``) and tells how far it has come, which is written to the row about
  once a second; nothing heavy runs in the server's process. Once ready, the file is kept under
  the quota as ``uploads/<sha256>.mp4``, the :class:`Video` is registered and named, and the
  source is deleted.
- **Cancelled** (:func:`preparation_cancel`): the row says so; the thread that holds it stops
  its wait or kills its child, deletes its files and the row.
- **Failed**: the row keeps why (``failure``), for its owner's gallery, and no file.
- **Held**: each process names itself in the rows it holds (``worker``) and says every third of
  ``PREPARATION_LEASE_SEC`` that it still holds them (``heartbeat``, :func:`preparations_keep`).
  A row whose holder has been silent for longer (a restarted or killed server) is taken up by
  the next process that looks: prepared again from its source, up to :data:`ATTEMPTS` times,
  cleaned up if it was cancelled, failed if its source is gone.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.core.files.uploadedfile import UploadedFile
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from core.processes import ChildFailed, ProcessPool
from core.threads import MadeOnce, Stopped
from core.turns import NoTurn
from segmentation.errors import SegmentationError, ServerBusy, UnsupportedMedia, UploadNotFound
from segmentation.models import DeletionId, Video, VideoPreparation
from segmentation.selectors import preparation_of
from segmentation.services.consent import deletion_id_current
from segmentation.services.media_store import (
    PREPARING_DIR,
    SOURCE_SUFFIX,
    UPLOADS_DIR,
    media_keep,
    media_quota_check,
)
from segmentation.services.transcode_slots import MAX_THREADS_EACH, RETRY_AFTER_SEC
from segmentation.services.upload_names import upload_name_clean, video_name_give
from segmentation.services.videos import POSTERS_DIR, media_path, video_register
from segmentation.transcode import Limits, MediaError, header_check
from segmentation.video_preparation import Prepared, Progress, prepare

logger = logging.getLogger(__name__)

# Nothing arrived: said as such, since "not a readable video" sends people to check a file
# that was never read (an interrupted copy, a file picked before it was written).
EMPTY_FILE = "the file is empty"
FPS = 24  # the stored frame rate (the SAM 2 API's uploadVideo says so)
NICENESS = 10  # below the server's requests: an upload may wait, a click should not
IDLE_SEC = 60.0  # a preparation's process left idle this long ends
ATTEMPTS = 3  # a preparation its server stopped in this many times fails
PROGRESS_WRITE_SEC = 1.0  # how often a preparation's progress is written to its row
State = VideoPreparation.State
UNFINISHED = list(VideoPreparation.UNFINISHED)
_ADMITTING = threading.Lock()
# This process, as the rows it holds name it.
WORKER = uuid.uuid4().hex


class Preparations:
    """This process's side of the preparations: its child processes, the stop flag of each
    preparation it holds, and the keeper that renews its hold and takes up abandoned ones."""

    def __init__(self, *, parallel: int, queued: int, memory_bytes: int) -> None:
        self.threads_each = max(1, min(MAX_THREADS_EACH, (os.cpu_count() or 1) // parallel))
        # The line holds every preparation admitted (the admission bounds it); a cancelled one
        # leaves it at once.
        self.pool = ProcessPool(
            size=parallel,
            queued=queued + settings.UPLOADS_PER_CLIENT + parallel,
            niceness=NICENESS,
            idle_sec=IDLE_SEC,
            memory_bytes=memory_bytes,
        )
        self._stops: dict[uuid.UUID, threading.Event] = {}
        self._guard = threading.Lock()
        self._keeper: threading.Thread | None = None

    def hold(self, preparation_id: uuid.UUID) -> threading.Event:
        with self._guard:
            return self._stops.setdefault(preparation_id, threading.Event())

    def release(self, preparation_id: uuid.UUID) -> None:
        with self._guard:
            self._stops.pop(preparation_id, None)

    def held(self) -> list[uuid.UUID]:
        with self._guard:
            return list(self._stops)

    def stop(self, preparation_id: uuid.UUID) -> None:
        with self._guard:
            stop = self._stops.get(preparation_id)
        if stop is not None:
            stop.set()

    def keep(self) -> None:
        """Start the keeper (once): a thread that renews this process's hold on its
        preparations, stops those cancelled elsewhere and takes up abandoned ones."""
        with self._guard:
            if self._keeper is not None:
                return
            self._keeper = threading.Thread(
                target=_keeper_loop, name="preparations-keeper", daemon=True
            )
        self._keeper.start()


@MadeOnce
def preparations() -> Preparations:
    """The process's preparations, from the settings on first use."""
    return Preparations(
        parallel=settings.MAX_PARALLEL_TRANSCODES,
        queued=settings.MAX_QUEUED_TRANSCODES,
        memory_bytes=settings.PREPARATION_MEMORY_MB * 2**20,
    )


@dataclass(frozen=True)
class Owner:
    """Who uploads: the browser's session key, its address, its deletion ID if it has one."""

    session_key: str
    client: str
    deletion_id: DeletionId | None = None


def upload_owner(*, session: SessionBase, client: str) -> Owner:
    """The uploader: its cookie session (made now if it has none, as a deletion ID's owner
    is), its address and its deletion ID."""
    if session.session_key is None:
        session.save()
        session.modified = True  # so that the browser is given its cookie
    return Owner(
        session_key=session.session_key,
        client=client,
        deletion_id=deletion_id_current(session=session),
    )


def preparation_start(
    *, file: UploadedFile, start: float, duration: float, owner: Owner
) -> VideoPreparation:
    """Admit an uploaded video for preparation (the module's bounds) and keep its file; the
    row, queued. Refused with a typed error, having kept nothing."""
    if file.size == 0:
        raise UnsupportedMedia(EMPTY_FILE)
    media_quota_check(adding=file.size or 0)
    preparation_id = uuid.uuid4()
    source = media_path(f"{PREPARING_DIR}/{preparation_id}{SOURCE_SUFFIX}")
    _file_keep(file, source)
    try:
        try:
            header_check(source, _limits(), label=file.name)
        except MediaError as error:
            raise UnsupportedMedia(str(error)) from None
        with _ADMITTING, transaction.atomic():
            _admission_check(owner)
            return VideoPreparation.objects.create(
                id=preparation_id,
                owner=owner.session_key,
                client=owner.client,
                deletion_id=owner.deletion_id,
                file_name=upload_name_clean(name=file.name or ""),
                source_path=_relative(source),
                source_bytes=source.stat().st_size,
                start=start,
                duration=min(duration, float(settings.MAX_UPLOAD_DURATION_SEC)),
                worker=WORKER,
                heartbeat=timezone.now(),
            )
    except BaseException:
        source.unlink(missing_ok=True)
        raise


def preparation_run(*, preparation_id: uuid.UUID, keep_failure: bool = True) -> Video:
    """Prepare the video (in the calling thread's turn, in a child process) and register it;
    the :class:`Video`. A failure raises its typed error, and stays on the row for the gallery
    unless ``keep_failure`` is false (the caller reports it itself); a cancel raises
    :class:`Stopped`, and leaves neither files nor row."""
    here = preparations()
    stop = here.hold(preparation_id)
    try:
        preparation = VideoPreparation.objects.get(pk=preparation_id)
        try:
            if preparation.state == State.CANCELLED:
                raise Stopped
            prepared = _prepared(preparation, stop=stop, pool=here.pool, threads=here.threads_each)
            video = _finish(preparation, prepared)
        except Stopped:
            _clean(preparation_id, delete_row=True)
            raise
        except SegmentationError as error:
            _fail(preparation_id, error.message, keep=keep_failure)
            raise
        except Exception:
            logger.exception("the upload %s could not be prepared", preparation_id)
            message = f"{preparation.file_name} could not be prepared: the server failed"
            _fail(preparation_id, message, keep=keep_failure)
            raise UnsupportedMedia(message) from None
        return video
    finally:
        here.release(preparation_id)


def preparation_run_in_background(*, preparation_id: uuid.UUID) -> None:
    """:func:`preparation_run` in a thread of its own, which answers nobody: its row tells."""

    def run() -> None:
        try:
            preparation_run(preparation_id=preparation_id)
        except (SegmentationError, Stopped):
            pass  # on the row, or gone with it
        except Exception:
            logger.exception("the preparation of %s failed", preparation_id)
        finally:
            connection.close()

    threading.Thread(target=run, name=f"preparation-{preparation_id}", daemon=True).start()


def preparation_cancel(*, preparation_id: uuid.UUID, owner: str) -> None:
    """Cancel an unfinished preparation of ``owner``'s, or forget a finished one (its failure
    read); :class:`UploadNotFound` if ``owner`` has none by that ID."""
    preparation = preparation_of(preparation_id=preparation_id, owner=owner)
    if preparation is None:
        raise UploadNotFound(f"no upload {preparation_id} of yours")
    if preparation.unfinished:
        VideoPreparation.objects.filter(pk=preparation_id, state__in=UNFINISHED).update(
            state=State.CANCELLED
        )
        preparations().stop(preparation_id)
    else:
        VideoPreparation.objects.filter(pk=preparation_id).exclude(state=State.CANCELLED).delete()


def preparations_keep() -> None:
    """This process's start-up work for the preparations: its keeper started, so that those a
    previous run left unfinished are taken up (``PREPARATION_LEASE_SEC`` after it stopped)."""
    preparations().keep()


def preparations_look() -> None:
    """One round of the keeper: renew this process's hold on its preparations, stop those
    cancelled meanwhile, take up those whose holder went silent."""
    here = preparations()
    now = timezone.now()
    held = here.held()
    if held:
        VideoPreparation.objects.filter(pk__in=held, worker=WORKER).update(heartbeat=now)
        for preparation_id in VideoPreparation.objects.filter(
            pk__in=held, state=State.CANCELLED
        ).values_list("pk", flat=True):
            here.stop(preparation_id)
    stale = now - timedelta(seconds=settings.PREPARATION_LEASE_SEC)
    abandoned = VideoPreparation.objects.filter(
        state__in=[*UNFINISHED, State.CANCELLED], heartbeat__lt=stale
    ).exclude(pk__in=held)
    for preparation in abandoned:
        taken = VideoPreparation.objects.filter(
            pk=preparation.pk, heartbeat=preparation.heartbeat
        ).update(worker=WORKER, heartbeat=now)
        if taken:
            _take_up(preparation)


def _take_up(preparation: VideoPreparation) -> None:
    """A preparation whose holder went, now this process's: cleaned up, failed or run again."""
    logger.info("taking up the upload %s (%s)", preparation.pk, preparation.state)
    if preparation.state == State.CANCELLED:
        _clean(preparation.pk, delete_row=True)
        return
    _clean(preparation.pk, delete_row=False, keep_source=True)  # what the last try left
    if preparation.attempts + 1 >= ATTEMPTS:
        _fail(
            preparation.pk,
            f"{preparation.file_name} could not be prepared: the server stopped "
            f"{preparation.attempts + 1} times while preparing it",
            keep=True,
        )
        return
    if not media_path(preparation.source_path).exists():
        _fail(
            preparation.pk,
            f"{preparation.file_name} could not be prepared: its file was lost when the "
            "server stopped; upload it again",
            keep=True,
        )
        return
    VideoPreparation.objects.filter(pk=preparation.pk).update(
        state=State.QUEUED, frames_done=0, attempts=preparation.attempts + 1
    )
    preparation_run_in_background(preparation_id=preparation.pk)


def _keeper_loop() -> None:
    while True:
        time.sleep(settings.PREPARATION_LEASE_SEC / 3)
        try:
            close_old_connections()
            preparations_look()
        except Exception:  # the next round tries again
            logger.exception("the preparations' keeper failed a round")


def _prepared(
    preparation: VideoPreparation, *, stop: threading.Event, pool: ProcessPool, threads: int
) -> Prepared:
    """The child's work on the preparation: in its turn, its progress written to the row."""
    partial = media_path(f"{PREPARING_DIR}/{preparation.pk}.{preparation.attempts}.mp4")
    written = [0.0]

    def on_progress(progress: Progress) -> None:
        now = time.monotonic()
        first = written[0] == 0.0
        if not first and now - written[0] < PROGRESS_WRITE_SEC and progress.done < progress.total:
            return
        written[0] = now
        updated = VideoPreparation.objects.filter(
            pk=preparation.pk, state__in=UNFINISHED, worker=WORKER
        ).update(
            state=State.PREPARING,
            frames_done=progress.done,
            frames_total=progress.total,
            heartbeat=timezone.now(),
        )
        if not updated:  # cancelled, or taken up by another process
            stop.set()

    try:
        return pool.call(
            prepare,
            stop=stop,
            on_progress=on_progress,
            source=str(media_path(preparation.source_path)),
            destination=str(partial),
            posters=str(media_path(POSTERS_DIR)),
            fps=FPS,
            max_side=settings.MAX_VIDEO_SIDE,
            start=preparation.start,
            duration=preparation.duration,
            limits=_limits(),
            label=preparation.file_name,
            threads=threads,
        )
    except MediaError as error:
        raise UnsupportedMedia(str(error)) from None
    except MemoryError:
        raise UnsupportedMedia(
            f"{preparation.file_name} could not be prepared within "
            f"{settings.PREPARATION_MEMORY_MB} MB of memory"
        ) from None
    except ChildFailed as error:
        raise UnsupportedMedia(f"{preparation.file_name} could not be prepared: {error}") from None
    except NoTurn as error:
        raise ServerBusy(
            f"too many uploads are being prepared; try again in {RETRY_AFTER_SEC} s",
            retry_after=error.retry_after,
        ) from None


def _finish(preparation: VideoPreparation, prepared: Prepared) -> Video:
    """The prepared file kept as ``uploads/<sha256>.mp4`` (under the quota), its Video
    registered and named, the row ready and the source gone."""
    partial = media_path(f"{PREPARING_DIR}/{preparation.pk}.{preparation.attempts}.mp4")
    with transaction.atomic():
        # Cancelled meanwhile, or its client's data deleted (consent.py): no video.
        row = VideoPreparation.objects.select_for_update().filter(
            pk=preparation.pk, state__in=UNFINISHED
        )
        preparation = row.first()
        if preparation is None:
            raise Stopped
        media_path(preparation.source_path).unlink(missing_ok=True)
        destination = media_path(f"{UPLOADS_DIR}/{prepared.sha256}.mp4")
        media_keep(partial=partial, destination=destination)
        video = video_register(
            path=destination,
            origin=Video.Origin.UPLOAD,
            deletion_id=preparation.deletion_id,
            info=prepared.info,
            sha256=prepared.sha256,
        )
        video = video_name_give(video=video, file_name=preparation.file_name)
        row.update(
            state=State.READY,
            video=video,
            frames_done=prepared.info.frame_count,
            frames_total=prepared.info.frame_count,
            heartbeat=timezone.now(),
        )
    return video


def _fail(preparation_id: uuid.UUID, message: str, *, keep: bool) -> None:
    """The preparation failed for ``message``: its files deleted, the row failed (or gone)."""
    _clean(preparation_id, delete_row=not keep)
    if keep:
        VideoPreparation.objects.filter(pk=preparation_id).exclude(state=State.CANCELLED).update(
            state=State.FAILED, failure=message, heartbeat=timezone.now()
        )
        # cancelled just as it failed: gone, as a cancel leaves it
        VideoPreparation.objects.filter(pk=preparation_id, state=State.CANCELLED).delete()


def _clean(preparation_id: uuid.UUID, *, delete_row: bool, keep_source: bool = False) -> None:
    """The preparation's files deleted (its source too unless ``keep_source``), and its row."""
    for path in media_path(PREPARING_DIR).glob(f"{preparation_id}.*"):
        if not (keep_source and path.name.endswith(SOURCE_SUFFIX)):
            path.unlink(missing_ok=True)
    if delete_row:
        VideoPreparation.objects.filter(pk=preparation_id).delete()


def _admission_check(owner: Owner) -> None:
    """:class:`ServerBusy` past the preparations unfinished at once, in all or the client's."""
    unfinished = VideoPreparation.objects.filter(state__in=UNFINISHED)
    parallel, queued = settings.MAX_PARALLEL_TRANSCODES, settings.MAX_QUEUED_TRANSCODES
    if unfinished.count() >= parallel + queued:
        raise ServerBusy(
            f"too many uploads at once: {parallel} being prepared and {queued} waiting; "
            f"try again in {RETRY_AFTER_SEC} s",
            retry_after=RETRY_AFTER_SEC,
        )
    mine = unfinished.filter(client=owner.client).count()
    if mine >= settings.UPLOADS_PER_CLIENT:
        raise ServerBusy(
            f"{mine} of your uploads are being prepared, as many as one client may have at "
            f"once; try again in {RETRY_AFTER_SEC} s, or cancel one",
            retry_after=RETRY_AFTER_SEC,
        )


def _file_keep(file: UploadedFile, destination: Path) -> None:
    """The upload's bytes at ``destination``: its temporary file moved there (Django deletes
    none it no longer has), or a small upload's written."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    temporary = getattr(file, "temporary_file_path", None)
    if temporary is not None:
        shutil.move(temporary(), destination)
        return
    with destination.open("wb") as writer:
        for chunk in file.chunks():
            writer.write(chunk)


def _limits() -> Limits:
    return Limits(
        max_pixels=settings.MAX_UPLOAD_PIXELS, max_pixel_rate=settings.MAX_UPLOAD_PIXEL_RATE
    )


def _relative(path: Path) -> str:
    return path.resolve().relative_to(Path(settings.MEDIA_ROOT).resolve()).as_posix()
