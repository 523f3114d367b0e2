"""Segmentation sessions: the one API the GraphQL resolvers and the views call.

A session lives in the memory of the process that runs its engine, its *host*: this process
(the embedded default, ``local_sessions.py``), or the inference worker that opened it when
``SEGMENTATION_WORKERS`` is on (``workers/client.py`` asks it over the channel layer). Both
hosts take the same operations and answer with the same typed results (``session_types.py``).
This module knows the host only as :class:`SessionHost`: which one answers is given to it
(:func:`session_host_provide`) by the app's ``ready()`` (``apps.py``), above the services, so
that the services never import the workers. The annotation import, which drives a host a frame
at a time, is ``annotation_imports.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Protocol

from segmentation.engines.base import Direction
from segmentation.errors import BadUserInput, SegmentationError, SessionNotFound
from segmentation.models import PropagationJob
from segmentation.selectors import (
    WorkSummary,
    owner_job_running,
    video_get,
    work_masks_between,
    work_summary,
)
from segmentation.services.propagation_jobs import (
    job_cancel,
    job_create,
    job_end,
    propagation_reach,
    work_of,
)
from segmentation.services.session_types import (
    Annotations,
    Clicks,
    FrameMasks,
    HeldSession,
    Propagation,
)
from segmentation.services.videos import media_path


class SessionHost(Protocol):
    """Where sessions live and their operations run. Each operation raises the API's typed
    errors (``segmentation/errors.py``): an unknown or ended session is ``SessionNotFound``."""

    def open(self, *, video_path: str, file: str, client: str = "", owner: str = "") -> str: ...

    def held(self) -> list[HeldSession]: ...

    def close(self, *, session_id: str) -> bool: ...

    def ping(self, *, session_id: str) -> bool: ...

    def engine(self, *, session_id: str) -> str: ...

    def receipt(self, *, session_id: str) -> str: ...

    def work(self, *, session_id: str) -> int | None: ...

    def add_points(self, *, session_id: str, clicks: Clicks) -> FrameMasks: ...

    def clear_points_in_frame(
        self, *, session_id: str, frame_index: int, object_id: int
    ) -> FrameMasks: ...

    def clear_points_in_video(self, *, session_id: str) -> None: ...

    def remove_object(self, *, session_id: str, object_id: int) -> list[FrameMasks]: ...

    def cancel_propagation(self, *, session_id: str) -> bool: ...

    def propagation_job(self, *, session_id: str, job_id: int) -> None: ...

    def annotations(self, *, session_id: str) -> Annotations: ...

    def import_annotations(
        self, *, session_id: str, annotations: Annotations, append: bool = False, replay: str = ""
    ) -> list[FrameMasks]: ...

    async def propagation(
        self,
        *,
        session_id: str,
        start_frame_index: int,
        direction: Direction = "both",
        end_frame_index: int | None = None,
    ) -> Propagation: ...


_host: Callable[[], SessionHost] | None = None


def session_host_provide(host: Callable[[], SessionHost]) -> None:
    """Where this process's sessions live from now on: ``host()`` gives the host each operation
    runs on (called at each operation, so that a host made on first use is made only then)."""
    global _host
    _host = host


def session_host() -> SessionHost:
    """The host given by :func:`session_host_provide`: this process's sessions, or the
    inference workers' when there are workers."""
    if _host is None:
        raise RuntimeError("no session host: the segmentation app's ready() provides it")
    return _host()


def session_start(*, path: str, client: str, owner: str = "") -> str:
    """A new session on the library's video at ``path`` for ``client`` (its address, as
    ``core/client_address.py`` tells it), within its ``MAX_SESSIONS_PER_CLIENT``; its ID. With
    an ``owner`` (the browser's cookie session), it starts with the owner's stored work on the
    video, and keeps its own there (``work_store.py``)."""
    video = video_get(path=path)
    running = owner_job_running(video_path=video.path, owner=owner)
    if running is not None and _alive(running.session_id):
        # the owner's job runs on a session of its own: a page that comes back takes it up
        return running.session_id
    return session_host().open(
        video_path=video.path, file=str(media_path(video.path)), client=client, owner=owner
    )


def _alive(session_id: str) -> bool:
    """Whether the session lives (on a worker that is gone: it does not)."""
    try:
        return session_host().ping(session_id=session_id)
    except SegmentationError:
        return False


def sessions_held() -> list[HeldSession]:
    """Every live session, by client and then oldest first: who holds what, for the admin."""
    return sorted(session_host().held(), key=lambda s: (s.client, -s.age_sec))


def session_close(*, session_id: str) -> bool:
    """Close the session and free what it holds; ``False`` if no such session lived."""
    return session_host().close(session_id=session_id)


def session_ping(*, session_id: str) -> bool:
    """Keep a session alive; ``True`` while it lives, ``False`` once closed or expired."""
    return session_host().ping(session_id=session_id)


def session_engine(*, session_id: str) -> str:
    """What answers the session, in a few words (the engine of the worker that holds it)."""
    return session_host().engine(session_id=session_id)


def session_receipt(*, session_id: str) -> str:
    """What the server has shown the session, signed: given back with a replay of its work
    after the server lost it, it is not metered again (``local_sessions.py``)."""
    return session_host().receipt(session_id=session_id)


def session_work(*, session_id: str) -> int | None:
    """Where the session keeps its work (``work_store.py``), which any process reads from the
    database; None for a session that keeps none (opened for no owner)."""
    return session_host().work(session_id=session_id)


# The longest session ID looked up: the server's are UUIDs (36 characters).
SESSION_ID_MAX_CHARS = 64
# The most frames one read of a session's stored masks may span (:func:`session_work_masks`):
# at most a few hundred kilobytes of RLE for a few objects, read in one indexed query.
WORK_MASKS_MAX_FRAMES = 240


def session_work_summary(*, session_id: str) -> WorkSummary | None:
    """What the live session's work holds: its video, each object's masked frames as runs and
    its prompts (``selectors.work_summary``); None for a session that keeps no work."""
    work_id = _live_work(session_id)
    return None if work_id is None else work_summary(work_id=work_id)


def session_work_masks(
    *, session_id: str, first: int, last: int
) -> list[tuple[int, dict[int, str]]] | None:
    """The stored masks of the live session's frames ``first`` to ``last`` (inclusive, at most
    :data:`WORK_MASKS_MAX_FRAMES`), the frames with a mask in order; None for a session that
    keeps no work."""
    if not 0 <= first <= last:
        raise BadUserInput(f"the frames {first} to {last} are not a range of frames")
    if last - first + 1 > WORK_MASKS_MAX_FRAMES:
        raise BadUserInput(
            f"the frames {first} to {last} are more than {WORK_MASKS_MAX_FRAMES} at once"
        )
    work_id = _live_work(session_id)
    return None if work_id is None else work_masks_between(work_id=work_id, first=first, last=last)


def _live_work(session_id: str) -> int | None:
    if len(session_id) > SESSION_ID_MAX_CHARS:
        raise SessionNotFound(f"no session with id {session_id!r}")
    return session_work(session_id=session_id)


def session_add_points(*, session_id: str, clicks: Clicks) -> FrameMasks:
    """Clicks for one object on one frame; every object's mask on that frame."""
    return session_host().add_points(session_id=session_id, clicks=clicks)


def session_clear_points_in_frame(
    *, session_id: str, frame_index: int, object_id: int
) -> FrameMasks:
    """Forget an object's points on a frame; every object's mask on that frame."""
    return session_host().clear_points_in_frame(
        session_id=session_id, frame_index=frame_index, object_id=object_id
    )


def session_clear_points_in_video(*, session_id: str) -> None:
    """Forget every point and object of the session."""
    session_host().clear_points_in_video(session_id=session_id)


def session_remove_object(*, session_id: str, object_id: int) -> list[FrameMasks]:
    """Forget the object; the masks of the frames where it had points, without it."""
    return session_host().remove_object(session_id=session_id, object_id=object_id)


def session_cancel_propagation(*, session_id: str) -> bool:
    """Stop the session's running propagation at its next frame."""
    return session_host().cancel_propagation(session_id=session_id)


def session_annotations(*, session_id: str) -> Annotations:
    """The session's masks, in the format ``uploadAnnotations`` takes."""
    return session_host().annotations(session_id=session_id)


def session_propagation_job(
    *,
    session_id: str,
    start_frame_index: int,
    direction: Direction = "both",
    end_frame_index: int | None = None,
) -> PropagationJob:
    """The session's propagation as a job (``propagation_jobs.py``): run in the background by
    the session's host, each frame kept in the session's work, going on when the client goes;
    the job's row. Raises the API's errors before it runs: no such session, one that keeps no
    work (opened without an owner), a range outside the video, a job already running there."""
    work_id = session_work(session_id=session_id)
    if work_id is None:
        raise BadUserInput(
            "this session keeps no work (it was opened without a cookie session), so it cannot "
            "run a propagation job: stream one with POST /propagate_in_video"
        )
    frame_count = work_of(work_id=work_id).video.frame_count
    if not 0 <= start_frame_index < frame_count:
        raise BadUserInput(
            f"start frame index {start_frame_index} is outside the video's frames "
            f"0..{frame_count - 1}"
        )
    propagation_reach(
        start=start_frame_index, direction=direction, end=end_frame_index, frame_count=frame_count
    )
    job = job_create(
        work_id=work_id,
        session_id=session_id,
        start=start_frame_index,
        direction=direction,
        end=end_frame_index,
        frame_count=frame_count,
    )
    try:
        session_host().propagation_job(session_id=session_id, job_id=job.id)
    except SegmentationError as error:
        job_end(job_id=job.id, status=PropagationJob.Status.FAILED, reason=error.message)
        raise
    job.refresh_from_db()
    return job


def session_job_cancel(*, job_id: int, owner: str) -> PropagationJob | None:
    """Cancel the owner's propagation job: its row at once, its host at its next frame; the
    job, or None if the owner has no such job."""
    job = job_cancel(job_id=job_id, owner=owner)
    if job is not None:
        with contextlib.suppress(SegmentationError):  # its session gone: nothing runs it
            session_host().cancel_propagation(session_id=job.session_id)
    return job


async def session_propagation(
    *,
    session_id: str,
    start_frame_index: int,
    direction: Direction = "both",
    end_frame_index: int | None = None,
) -> Propagation:
    """The session's propagation as it is computed (see :class:`Propagation`): ``direction``
    from the start frame, up to ``end_frame_index`` inclusive (None: the video's end; with
    ``"both"``, as far from the start either way)."""
    return await session_host().propagation(
        session_id=session_id,
        start_frame_index=start_frame_index,
        direction=direction,
        end_frame_index=end_frame_index,
    )
