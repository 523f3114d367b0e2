"""The mask exports, as downloads: a session's annotations as JSON, and an annotation file in
the export format converted to DAVIS label PNGs, COCO instances or YOLO labels; for a session
that keeps its work, the same files made from the store and streamed as they are made
(``services/work_exports.py``), whatever the video's length.

Downloads are named after their video's display name (``Video.export_name``), non-ASCII ones as
RFC 6266 says: an ASCII ``filename`` for old clients, the name itself in ``filename*``. The
conversions check and convert the posted file in a process of their own
(``services/exports.py``), killed when the client hangs up.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import AsyncIterator, Callable
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from core.threads import call_in_thread, iterate_in_thread
from segmentation.annotation_json import annotations_bound
from segmentation.errors import BadUserInput, ErrorCode, SegmentationError
from segmentation.selectors import videos_at
from segmentation.services.coco_instances import coco_instances_build
from segmentation.services.engine_prices import EXPORT, file_cost
from segmentation.services.exports import export_convert
from segmentation.services.mask_archives import mask_archive_build
from segmentation.services.sessions import session_annotations
from segmentation.services.work_exports import (
    COCO,
    MASKS,
    YOLO,
    Conversion,
    work_annotations_json,
    work_converted,
    work_export_of,
    work_export_size,
)
from segmentation.services.yolo_polygons import yolo_labels_build
from segmentation.views.annotation_posts import annotation_body, annotation_parsed, stoppable
from segmentation.views.cost_charges import charged
from segmentation.views.responses import error_response, refusal

logger = logging.getLogger(__name__)


@require_safe
async def annotations_export(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /annotations/<session_id>.json``: the session's masks, as a download: streamed from
    the store for a session that keeps its work, else made from its engine state."""
    try:
        export = await sync_to_async(work_export_of)(session_id=session_id)
        if export is None:
            return await sync_to_async(_state_export)(session_id)
    except SegmentationError as error:
        return refusal(error)
    stop = threading.Event()
    pieces = iterate_in_thread(
        lambda: work_annotations_json(export=export), stop=stop, name="annotations"
    )
    response = StreamingHttpResponse(
        _logged(request, pieces, first=None), content_type="application/json"
    )
    response["Content-Disposition"] = _attachment(
        export.video.export_name(suffix="-annotations.json")
    )
    return response


def _state_export(session_id: str) -> HttpResponse:
    """The annotation file of a session that keeps no work, from its engine state."""
    annotations = session_annotations(session_id=session_id)
    video = videos_at(path=annotations.video).first()
    name = (
        f"annotations-{session_id}.json"
        if video is None
        else video.export_name(suffix="-annotations.json")
    )
    response = JsonResponse(annotations.as_message())
    response["Content-Disposition"] = _attachment(name)
    return response


@require_safe
async def work_masks_archive(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /annotations/<session_id>/masks.zip``: the session's stored work as
    ``masks.zip`` converts an annotation file, streamed."""
    return await _work_converted(request, session_id, MASKS)


@require_safe
async def work_coco_instances(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /annotations/<session_id>/coco.json``: the session's stored work as ``coco.json``
    converts an annotation file, streamed."""
    return await _work_converted(request, session_id, COCO)


@require_safe
async def work_yolo_labels(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /annotations/<session_id>/yolo.zip``: the session's stored work as ``yolo.zip``
    converts an annotation file, streamed."""
    return await _work_converted(request, session_id, YOLO)


async def _work_converted(
    request: HttpRequest, session_id: str, conversion: Conversion
) -> HttpResponse:
    """The session's stored work converted in an export process and answered as it comes
    (``services/work_exports.py``). Charged to the client's cost limit as the POSTed
    conversion of a file of its masks' size is, before it runs; its refusals (a line of
    exports full, an object ID the format cannot hold) come before the first byte."""
    try:
        export = await sync_to_async(work_export_of)(session_id=session_id)
        if export is None:
            raise BadUserInput(
                f"session {session_id} keeps no work on the server (it was opened without a "
                "cookie session): POST its annotation file to the conversion instead"
            )
        size = await sync_to_async(work_export_size)(export=export)
    except SegmentationError as error:
        return refusal(error)
    refused = await sync_to_async(charged)(request, weight=file_cost(size) + EXPORT)
    if refused is not None:
        return refused
    stop = threading.Event()
    pieces = iterate_in_thread(
        lambda: work_converted(export=export, conversion=conversion, stop=stop),
        stop=stop,
        name="export",
    )
    try:
        first = await anext(pieces)
    except SegmentationError as error:
        await pieces.aclose()
        return refusal(error)
    response = StreamingHttpResponse(
        _logged(request, pieces, first=first), content_type=conversion.content_type
    )
    response["Content-Disposition"] = _attachment(conversion.name(export.video))
    return response


async def _logged(
    request: HttpRequest, pieces: AsyncIterator[bytes], *, first: bytes | None
) -> AsyncIterator[bytes]:
    """``first`` (if any) and ``pieces``, saying in the log when the client went away before
    the end (closing ``pieces`` stops its work)."""
    ended = False
    try:
        if first is not None:
            yield first
        async for piece in pieces:
            yield piece
        ended = True
    finally:
        if not ended:
            logger.info("%s stopped: the client went away", request.path)
        await pieces.aclose()


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
