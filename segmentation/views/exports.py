"""The mask exports, as downloads: a session's annotations as JSON, and an annotation file in
the export format converted to DAVIS label PNGs, COCO instances or YOLO labels.

Downloads are named after their video's display name (``Video.export_name``), non-ASCII ones as
RFC 6266 says: an ASCII ``filename`` for old clients, the name itself in ``filename*``. The
conversions check and convert the posted file in a process of their own
(``services/exports.py``), killed when the client hangs up.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from core.threads import call_in_thread
from segmentation.annotation_json import annotations_bound
from segmentation.errors import ErrorCode, SegmentationError
from segmentation.selectors import videos_at
from segmentation.services.coco_instances import coco_instances_build
from segmentation.services.engine_prices import EXPORT, file_cost
from segmentation.services.exports import export_convert
from segmentation.services.mask_archives import mask_archive_build
from segmentation.services.sessions import session_annotations
from segmentation.services.yolo_polygons import yolo_labels_build
from segmentation.views.annotation_posts import annotation_body, annotation_parsed, stoppable
from segmentation.views.cost_charges import charged
from segmentation.views.responses import error_response, refusal


@require_safe
def annotations_export(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /annotations/<session_id>.json``: the session's masks, as a download."""
    try:
        annotations = session_annotations(session_id=session_id)
    except SegmentationError as error:
        return refusal(error)
    video = videos_at(path=annotations.video).first()
    name = (
        f"annotations-{session_id}.json"
        if video is None
        else video.export_name(suffix="-annotations.json")
    )
    response = JsonResponse(annotations.as_message())
    response["Content-Disposition"] = _attachment(name)
    return response


@csrf_exempt
async def masks_archive(request: HttpRequest) -> HttpResponse:
    """``POST /annotations/masks.zip`` with annotations in the export format: a ZIP of per-frame
    label PNGs (DAVIS layout), as a download."""
    return await _converted(request, build=mask_archive_build, content_type="application/zip")


@csrf_exempt
async def coco_instances(request: HttpRequest) -> HttpResponse:
    """``POST /annotations/coco.json`` with annotations in the export format: a COCO instances
    file, one category per object, as a download."""
    return await _converted(request, build=coco_instances_build, content_type="application/json")


@csrf_exempt
async def yolo_labels(request: HttpRequest) -> HttpResponse:
    """``POST /annotations/yolo.zip`` with annotations in the export format: a ZIP of YOLO
    segmentation labels, one class per object, as a download."""
    return await _converted(request, build=yolo_labels_build, content_type="application/zip")


async def _converted(
    request: HttpRequest,
    *,
    build: Callable[..., tuple[str, bytes]],
    content_type: str,
) -> HttpResponse:
    """The posted annotations (the export format), converted by ``build`` and answered as a
    download. A file over the bounds of ``annotation_json.py`` is refused first; the request is
    charged to the client's cost limit by the file's size and a flat part (capped: see
    ``segmentation/services/engine_prices.py``) before it is parsed; the check and the
    conversion run in an export process (``services/exports.py``), killed when the client hangs
    up."""
    if request.method != "POST":
        return error_response(
            405, ErrorCode.BAD_USER_INPUT, "method not allowed: POST the annotations"
        )
    body = annotation_body(request)
    try:
        annotations_bound(body, max_bytes=settings.MAX_ANNOTATIONS_BYTES)
    except SegmentationError as error:
        return refusal(error)
    refused = await sync_to_async(charged)(request, weight=file_cost(len(body)) + EXPORT)
    if refused is not None:
        return refused
    try:
        data, video = await sync_to_async(annotation_parsed)(body)
    except SegmentationError as error:
        return refusal(error)
    stop = threading.Event()

    def convert() -> tuple[str, bytes]:
        return export_convert(build=build, data=data, video=video.shape, stop=stop)

    try:
        name, content = await call_in_thread(stoppable(request, convert), stop=stop, name="export")
    except SegmentationError as error:
        return refusal(error)
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = _attachment(name)
    return response


def _attachment(filename: str) -> str:
    """A download's ``Content-Disposition``: ``filename`` in ASCII (accents dropped, anything
    else, quotes and backslashes as ``_``) that every client reads, and where that is not the
    name itself, ``filename*`` (RFC 5987) that current ones prefer."""
    plain = "".join(
        character
        for character in unicodedata.normalize("NFKD", filename)
        if not unicodedata.combining(character)
    )
    plain = re.sub(r'[^\x20-\x7e]|["\\]', "_", plain)
    header = f'attachment; filename="{plain}"'
    if plain != filename:
        header += f"; filename*=UTF-8''{quote(filename, safe='')}"
    return header
