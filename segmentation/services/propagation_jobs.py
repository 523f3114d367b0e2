"""Propagations run as jobs: in the background, on a session that keeps its owner's work.

The annotator's propagation is a job rather than a request: it goes on when the page that
started it closes, any page of the owner's sees its progress (``GET /propagations``) and may
cancel it, and a restarted server takes it up from the last frame it stored. The SAM 2 API's
streaming propagation (``POST /propagate_in_video``) is not one: there a hang-up cancels.

A job is a row (:class:`~segmentation.models.PropagationJob`) and a thread in the process that holds
its session, the session's *host* (this process, or the inference worker that opened the session):
the thread propagates as the stream does, keeping each frame in the store and its progress in the
row, one after the other. Each host process renews the ``heartbeat`` of the jobs it runs every third
of ``PROPAGATION_JOB_LEASE_SEC`` and, as often, looks for jobs whose process stopped renewing theirs
(a restart, a crash, a worker gone): it claims one in a single conditional update, so that one
process takes it up, opens a session on the job's work (the engine given the stored prompts back, as
for any new session of the owner) and goes on from the frame after the last it stored. The database
holds the state; the processes that already run sessions run the jobs; no task queue is needed.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from segmentation.engines.base import DIRECTIONS, Direction
from segmentation.errors import BadUserInput
from segmentation.models import PropagationJob, Work
from segmentation.selectors import work_job_running

logger = logging.getLogger(__name__)


def jobs_heartbeat_sec() -> float:
    """How often a host renews its jobs' heartbeats and looks for jobs no process runs: a third
    of ``PROPAGATION_JOB_LEASE_SEC``, after which a silent job is taken up."""
    return settings.PROPAGATION_JOB_LEASE_SEC / 3


def propagation_reach(
    *, start: int, direction: Direction, end: int | None, frame_count: int
) -> int | None:
    """The API's last frame as SAM 2's ``max_frame_num_to_track``: how far past the start each
    direction goes (None: to the video's end). An end is a frame the person marked, so one
    outside the video or on the wrong side of the start is an error rather than cut short;
    with ``"both"`` its distance from the start bounds either way, as SAM 2's demo passes one
    count to its forward and its backward pass."""
    if direction not in DIRECTIONS:
        raise BadUserInput(f'direction must be "both", "forward" or "backward", got {direction!r}')
    if end is None:
        return None
    if not 0 <= end < frame_count:
        raise BadUserInput(
            f"end frame index {end} is outside the video's frames 0..{frame_count - 1}"
        )
    if direction == "forward" and end < start:
        raise BadUserInput(
            f"end frame index {end} is before start frame index {start}: "
            "a forward propagation ends at or after its start"
        )
    if direction == "backward" and end > start:
        raise BadUserInput(
            f"end frame index {end} is after start frame index {start}: "
            "a backward propagation ends at or before its start"
        )
    return abs(end - start)


@dataclass(frozen=True)
class Leg:
    """A part of a job that one call of the engine's propagation runs: from ``start``, one way,
    ``reach`` frames past it at most."""

    start: int
    direction: Direction
    reach: int


def job_legs(
    *, start: int, direction: Direction, end: int | None, frame_count: int, done: int
) -> list[Leg]:
    """What is left of a job that has stored ``done`` frames, in the order the engine gives
    them (``VideoState.propagate``: forward from the start to the end, then backward from the
    frame before the start)."""
    reach = frame_count if end is None else abs(end - start)
    last = min(start + reach, frame_count - 1)
    first = max(start - reach, 0)
    forward = list(range(start, last + 1)) if direction != "backward" else []
    backward_from = start - 1 if direction == "both" else start
    backward = list(range(backward_from, first - 1, -1)) if direction != "forward" else []
    legs = []
    if done < len(forward):
        legs.append(Leg(forward[done], "forward", last - forward[done]))
    left = backward[max(done - len(forward), 0) :]
    if left:
        legs.append(Leg(left[0], "backward", left[0] - first))
    return legs


def job_frames(*, start: int, direction: Direction, end: int | None, frame_count: int) -> int:
    """How many frames a job computes in all."""
    legs = job_legs(start=start, direction=direction, end=end, frame_count=frame_count, done=0)
    return sum(leg.reach + 1 for leg in legs)


def job_create(
    *,
    work_id: int,
    session_id: str,
    start: int,
    direction: Direction,
    end: int | None,
    frame_count: int,
) -> PropagationJob:
    """A new running job on the work; :class:`BadUserInput` while another one runs there."""
    try:
        with transaction.atomic():
            return PropagationJob.objects.create(
                work_id=work_id,
                start_frame=start,
                direction=direction,
                end_frame=end,
                frame_count=job_frames(
                    start=start, direction=direction, end=end, frame_count=frame_count
                ),
                session_id=session_id,
                runner="",
                heartbeat=timezone.now(),
            )
    except IntegrityError:
        running = work_job_running(work_id=work_id)
        raise BadUserInput(
            "a propagation already runs on this work"
            + ("" if running is None else f" (job {running.id}): cancel it first")
        ) from None


def job_taken(*, job_id: int, runner: str, done: int) -> None:
    """The job runs in ``runner`` (a process's boot ID) from now on, on from ``done`` frames
    (fewer than it had stored where it goes on from its carry: those are computed again)."""
    PropagationJob.objects.filter(id=job_id).update(
        runner=runner, done=done, heartbeat=timezone.now()
    )


def job_carry_keep(*, job_id: int, carry: bytes | None, done: int) -> None:
    """What the engine carries to its next frame, once ``done`` frames are stored."""
    PropagationJob.objects.filter(id=job_id, status=PropagationJob.Status.RUNNING).update(
        carry=carry, carry_done=done
    )


def job_progress(*, job_id: int, frame_index: int) -> bool:
    """One more frame of the job is stored; whether it is still to run (not cancelled)."""
    running = PropagationJob.objects.filter(id=job_id, status=PropagationJob.Status.RUNNING)
    updated = running.update(done=F("done") + 1, last_frame=frame_index, heartbeat=timezone.now())
    return updated == 1


def job_end(*, job_id: int, status: str, reason: str = "") -> None:
    """The job ended; a job cancelled meanwhile stays cancelled."""
    PropagationJob.objects.filter(id=job_id, status=PropagationJob.Status.RUNNING).update(
        status=status, reason=reason[:300], ended=timezone.now(), carry=None
    )


def job_cancel(*, job_id: int, owner: str) -> PropagationJob | None:
    """Mark the owner's running job cancelled (its host stops it at its next frame: the caller
    tells it); the job as it is now, or None if the owner has no such job."""
    job = PropagationJob.objects.filter(id=job_id, work__owner=owner).first() if owner else None
    if job is None:
        return None
    job_end(job_id=job.id, status=PropagationJob.Status.CANCELLED, reason="cancelled")
    job.refresh_from_db()
    return job


def jobs_heartbeat(*, job_ids: list[int]) -> None:
    """These jobs still run (in the caller's process)."""
    if job_ids:
        PropagationJob.objects.filter(id__in=job_ids, status=PropagationJob.Status.RUNNING).update(
            heartbeat=timezone.now()
        )


def job_claim_stale(*, runner: str) -> PropagationJob | None:
    """A running job no process has renewed for ``PROPAGATION_JOB_LEASE_SEC``, now
    ``runner``'s; None if there is none (or another process claimed it first)."""
    stale = timezone.now() - datetime.timedelta(seconds=settings.PROPAGATION_JOB_LEASE_SEC)
    candidates = PropagationJob.objects.filter(
        status=PropagationJob.Status.RUNNING, heartbeat__lt=stale
    ).order_by("id")
    for job in candidates[:5]:
        claimed = PropagationJob.objects.filter(
            id=job.id, status=PropagationJob.Status.RUNNING, heartbeat__lt=stale
        ).update(runner=runner, heartbeat=timezone.now())
        if claimed:
            return PropagationJob.objects.select_related("work__video").get(id=job.id)
    return None


def job_session_moved(*, job_id: int, session_id: str) -> None:
    """The job goes on on another session (its own was lost with its process)."""
    PropagationJob.objects.filter(id=job_id).update(session_id=session_id)


def work_of(*, work_id: int) -> Work:
    return Work.objects.select_related("video").get(id=work_id)
