"""``/uploads``: the gallery's uploads, answered at once and prepared in the background, beside
GraphQL because the SAM 2 API's ``uploadVideo`` must answer with a ready video (the official
frontend opens it at once) and its schema is fixed.

- ``POST /uploads`` (a multipart form: ``file``, and ``startTimeSec``, ``durationTimeSec`` as
  ``uploadVideo`` takes them): 202 and the upload, queued; refused as ``uploadVideo`` refuses.
- ``GET /uploads``: ``{"uploads": [...]}``, the client's uploads being prepared and those that
  failed, oldest first.
- ``GET /uploads/<id>``: one of them, or one that is ready (with its video's global ID).
- ``DELETE /uploads/<id>``: cancel one being prepared (its files deleted), or forget a failed
  one; 204.

Only the browser session that uploaded sees its uploads; another's are not found.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods
from graphql_relay import to_global_id

from core.client_address import client_address
from core.rate_limits import rate_limit_refusal, rate_limit_wait
from segmentation.errors import BadUserInput, ErrorCode, SegmentationError
from segmentation.graphql.types import VIDEO_TYPE
from segmentation.models import VideoPreparation
from segmentation.selectors import preparation_of, preparations_shown
from segmentation.services.preparations import (
    preparation_cancel,
    preparation_run_in_background,
    upload_owner,
)
from segmentation.services.uploads import video_upload_start
from segmentation.views.responses import error_response, refusal

FILE_FIELD = "file"


# CSRF-exempt as the other API views are: edge/cross_site.py refuses other sites' pages.
@csrf_exempt
@require_http_methods(["GET", "HEAD", "POST"])
def uploads_view(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _upload(request)
    owner = request.session.session_key
    shown = [] if owner is None else preparations_shown(owner=owner)
    return JsonResponse({"uploads": [upload_json(preparation) for preparation in shown]})


@csrf_exempt
@require_http_methods(["GET", "HEAD", "DELETE"])
def upload_view(request: HttpRequest, upload_id: uuid.UUID) -> HttpResponse:
    owner = request.session.session_key or ""
    if request.method == "DELETE":
        try:
            preparation_cancel(preparation_id=upload_id, owner=owner)
        except SegmentationError as error:
            return refusal(error)
        return HttpResponse(status=204)
    preparation = preparation_of(preparation_id=upload_id, owner=owner)
    if preparation is None:
        return error_response(404, ErrorCode.UPLOAD_NOT_FOUND, f"no upload {upload_id} of yours")
    return JsonResponse(upload_json(preparation))


def upload_json(preparation: VideoPreparation) -> dict[str, object]:
    """An upload as the gallery reads it."""
    return {
        "id": str(preparation.pk),
        "name": preparation.file_name,
        "state": preparation.state,
        "framesDone": preparation.frames_done,
        "framesTotal": preparation.frames_total,
        "progress": round(preparation.progress, 4),
        "failure": preparation.failure or None,
        "video": (
            None
            if preparation.video_id is None
            else to_global_id(VIDEO_TYPE, str(preparation.video_id))
        ),
    }


def _upload(request: HttpRequest) -> HttpResponse:
    address = client_address(request)
    wait = rate_limit_wait(address=address, kind="uploads", rate=settings.RATE_LIMIT_UPLOADS)
    if wait is not None:
        return rate_limit_refusal(path=request.path, what="uploads", wait=wait)
    file = request.FILES.get(FILE_FIELD)
    try:
        if file is None:
            raise BadUserInput(f"a multipart form with the video as its {FILE_FIELD!r} field")
        preparation = video_upload_start(
            file=file,
            owner=upload_owner(session=request.session, client=address),
            start=_seconds(request, "startTimeSec"),
            duration=_seconds(request, "durationTimeSec"),
        )
    except SegmentationError as error:
        return refusal(error)
    preparation_run_in_background(preparation_id=preparation.pk)
    return JsonResponse(upload_json(preparation), status=202)


def _seconds(request: HttpRequest, name: str) -> float | None:
    value = request.POST.get(name)
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        raise BadUserInput(f"{name} must be a number of seconds, got {value!r}") from None
