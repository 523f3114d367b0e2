"""The annotator's propagations, run as jobs (``services/propagation_jobs.py``): started on a
session, listed with their progress to any page of their owner's (the browser's cookie
session), and cancelled from any of them."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe

from segmentation.errors import ErrorCode, JobNotFound, SegmentationError
from segmentation.models import PropagationJob
from segmentation.selectors import owner_jobs
from segmentation.services.consent import owner_key
from segmentation.services.engine_prices import PROPAGATION
from segmentation.services.sessions import session_job_cancel, session_propagation_job
from segmentation.views.cost_charges import charged
from segmentation.views.responses import error_response, refusal

JOB_NOT_FOUND = "no such propagation job of yours"


@csrf_exempt
@require_POST
def propagation_job_start(request: HttpRequest, session_id: str) -> HttpResponse:
    """``POST /sessions/<session_id>/propagation`` ``{"start_frame_index"}`` (and optionally
    ``"direction"``, ``"end_frame_index"``, as ``/propagate_in_video`` takes them): 201 and
    ``{"job": ...}``, the job running; charged as a propagation is."""
    refused = charged(request, weight=PROPAGATION)
    if refused is not None:
        return refused
    try:
        body = json.loads(request.body or b"{}")
        start = body.get("start_frame_index", 0)
        direction = body.get("direction", "both")
        end = body.get("end_frame_index")
        if (
            not isinstance(start, int)
            or isinstance(start, bool)
            or not isinstance(direction, str)
            or (end is not None and (not isinstance(end, int) or isinstance(end, bool)))
        ):
            raise TypeError
    except (ValueError, TypeError, AttributeError, RecursionError):
        return error_response(
            400,
            ErrorCode.BAD_USER_INPUT,
            'the body must be JSON {"start_frame_index": <integer>, "direction": "both", '
            '"end_frame_index": <integer or null>}',
        )
    try:
        job = session_propagation_job(
            session_id=session_id,
            start_frame_index=start,
            direction=direction,
            end_frame_index=end,
        )
    except SegmentationError as error:
        return refusal(error)
    return JsonResponse({"job": _job(job)}, status=201)


@require_safe
def propagation_jobs_list(request: HttpRequest) -> HttpResponse:
    """``GET /propagations``: ``{"jobs": [...]}``, the owner's jobs, newest first, running or
    lately ended, with their progress."""
    jobs = owner_jobs(owner=owner_key(session=request.session))
    return JsonResponse({"jobs": [_job(job) for job in jobs]})


@csrf_exempt
@require_POST
def propagation_job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    """``POST /propagations/<job_id>/cancel``: ``{"job": ...}``, the owner's job cancelled (it
    stops at its next frame); 404 for a job that is not the owner's."""
    job = session_job_cancel(job_id=job_id, owner=owner_key(session=request.session))
    if job is None:
        return refusal(JobNotFound(JOB_NOT_FOUND))
    return JsonResponse({"job": _job(job)})


def _job(job: PropagationJob) -> dict[str, object]:
    return {
        "id": job.id,
        "video": job.work.video.path,
        "session_id": job.session_id,
        "start_frame_index": job.start_frame,
        "direction": job.direction,
        "end_frame_index": job.end_frame,
        "frames": job.frame_count,
        "done": job.done,
        "last_frame_index": None if job.last_frame < 0 else job.last_frame,
        "status": job.status,
        "reason": job.reason,
    }
