"""Propagations run as jobs (services/propagation_jobs.py), on this process's session host: they
store every frame with their progress, outlive the page that closes their session, stop when
cancelled in their row, and are taken up by a process when theirs is gone."""

from __future__ import annotations

import datetime
import time

import numpy as np
import pytest
from django.utils import timezone

from segmentation.models import PropagationJob, WorkMask
from segmentation.services.local_sessions import LocalSessions
from segmentation.services.propagation_jobs import Leg, job_create, job_legs
from segmentation.services.session_registry import SessionRegistry
from segmentation.services.session_types import Clicks
from segmentation.services.videos import media_path
from tests.segmentation.synthetic import HEIGHT, WIDTH, Video

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sessions():
    host = LocalSessions(SessionRegistry(idle_timeout=60, max_sessions=4))
    yield host
    host.jobs_unwatch()
    host.registry.close_idle()


def started(sessions: LocalSessions, path: str, video: Video, owner: str = "owner-a") -> str:
    session_id = sessions.open(video_path=path, file=str(media_path(path)), owner=owner)
    rows, columns = np.nonzero(video.masks[0][1])
    point = [columns.mean() / (WIDTH - 1), rows.mean() / (HEIGHT - 1)]
    clicks = Clicks(0, 1, [point], [1], clear_old_points=True)
    sessions.add_points(session_id=session_id, clicks=clicks)
    return session_id


def job_run(
    sessions: LocalSessions, session_id: str, *, start: int = 0, direction="both", end=None
):
    session = sessions.registry.get(session_id)
    job = job_create(
        work_id=session.work_id,
        session_id=session_id,
        start=start,
        direction=direction,
        end=end,
        frame_count=12,
    )
    sessions.propagation_job(session_id=session_id, job_id=job.id)
    return job


def ended(job: PropagationJob, timeout: float = 30) -> PropagationJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status != PropagationJob.Status.RUNNING:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job.id} still runs after {timeout} s: {job.done} frames done")


def test_what_is_left_of_a_job_is_the_rest_of_its_frames_in_the_engines_order():
    both = dict(start=5, direction="both", end=None, frame_count=12)
    assert job_legs(**both, done=0) == [Leg(5, "forward", 6), Leg(4, "backward", 4)]
    assert job_legs(**both, done=3) == [Leg(8, "forward", 3), Leg(4, "backward", 4)]
    assert job_legs(**both, done=7) == [Leg(4, "backward", 4)]
    assert job_legs(**both, done=9) == [Leg(2, "backward", 2)]
    assert job_legs(**both, done=12) == []
    ranged = dict(start=5, direction="both", end=7, frame_count=12)
    assert job_legs(**ranged, done=0) == [Leg(5, "forward", 2), Leg(4, "backward", 1)]
    backward = dict(start=5, direction="backward", end=2, frame_count=12)
    assert job_legs(**backward, done=1) == [Leg(4, "backward", 2)]


def test_a_job_stores_every_frame_with_its_progress(sessions, library_video, video):
    session_id = started(sessions, library_video, video)

    job = ended(job_run(sessions, session_id, start=4))

    assert (job.status, job.done, job.frame_count, job.last_frame) == ("done", 12, 12, 0)
    frames = sorted(set(WorkMask.objects.values_list("frame_index", flat=True)))
    assert frames == list(range(12))
    assert sessions.registry.get(session_id).job_id is None


def test_a_session_closed_while_its_job_runs_is_closed_once_the_job_ends(
    sessions, library_video, video
):
    # given a job on a session, held back before it starts
    session_id = started(sessions, library_video, video)
    session = sessions.registry.get(session_id)
    with session.lock:
        job = job_run(sessions, session_id)
        # when the page closes its session
        assert sessions.close(session_id=session_id) is True
        # then the session is still there for the job
        assert sessions.registry.get_quietly(session_id) is session

    # and the job runs to its end, and the session goes with it
    assert ended(job).status == "done"
    deadline = time.monotonic() + 5
    while sessions.registry.get_quietly(session_id) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sessions.registry.get_quietly(session_id) is None


def test_a_job_cancelled_in_its_row_stops_at_its_next_frame(sessions, library_video, video):
    # given a running job held back after its first frames
    session_id = started(sessions, library_video, video)
    session = sessions.registry.get(session_id)
    session.lock.acquire()
    job = job_run(sessions, session_id)
    # when its row is cancelled by a process that cannot reach it
    PropagationJob.objects.filter(id=job.id).update(status="cancelled", reason="cancelled")
    session.lock.release()

    # then it stops after at most a frame, and its row stays cancelled
    time.sleep(1.0)
    job.refresh_from_db()
    assert (job.status, job.reason) == ("cancelled", "cancelled")
    assert job.done <= 1
    assert sessions.registry.get(session_id).job_id is None


def test_a_job_no_process_runs_is_taken_up_where_it_stopped(
    sessions, library_video, video, settings
):
    settings.PROPAGATION_JOB_LEASE_SEC = 1  # the watch looks every third of a second
    # given a job whose process died after 5 frames (they are stored), its heartbeat old
    first = started(sessions, library_video, video)
    job = job_run(sessions, first, start=0, direction="forward")
    ended(job)
    WorkMask.objects.filter(frame_index__gte=5).delete()
    PropagationJob.objects.filter(id=job.id).update(
        status="running",
        done=5,
        last_frame=4,
        runner="a process gone",
        heartbeat=timezone.now() - datetime.timedelta(seconds=60),
    )
    sessions.registry.close(first)

    # when this process's watch takes a round
    sessions.jobs_watch()

    # then it takes the job up on a new session and finishes it from frame 5
    job = ended(job, timeout=60)
    assert (job.status, job.done, job.last_frame, job.runner) == ("done", 12, 11, sessions.boot)
    assert job.session_id != first
    frames = sorted(set(WorkMask.objects.values_list("frame_index", flat=True)))
    assert frames == list(range(12))
