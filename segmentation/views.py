"""The annotator's pages, and HTTP endpoints beside GraphQL: media files, frame images, the
propagation stream and mask exports.

- Downloads are named after their video's display name (``Video.export_name``), non-ASCII ones
  as RFC 6266 says: an ASCII ``filename`` for old clients, the name itself in ``filename*``.
- ``/media/...``: the files behind ``Video.url`` and ``Video.posterUrl``. Browsers' video
  elements seek with ``Range`` requests, which Django's own file responses do not answer; a
  single range is answered here with 206, anything else with the whole file.
- ``POST /propagate_in_video``: the SAM 2 demo's stream of masks. The engine runs in a thread of
  its own (it holds the session's lock throughout); parts go out as frames are done. A client
  that disconnects closes the stream, which stops the thread at its next frame, as does
  ``cancelPropagateInVideo``.
- ``POST /sessions/<id>/annotations``: an annotation file's work given to a session (the
  annotator's Import), beside GraphQL because the SAM 2 schema is fixed; with ``?replay=`` the
  receipt of a session the server lost (``GET /sessions/<id>/receipt``), whose work it gives back
  without metering it again (``services/local_sessions.py``).
- The import checks the file, then imports it, in a thread of its own (``core/threads.py``'s
  ``call_in_thread``): a client that hangs up stops it at its next frame, without holding the
  event loop or the thread that runs sync views meanwhile. The exports check and convert the
  file in a process of their own (``services/exports.py``), killed when the client hangs up.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import mimetypes
import re
import threading
import unicodedata
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from core.client_address import client_address
from core.rate_limits import CostMeter, rate_limit_capped, rate_limit_refusal, rate_limit_wait
from core.threads import Stopped, call_in_thread
from segmentation.annotation_json import annotations_bound, annotations_parse
from segmentation.errors import ErrorCode, SegmentationError
from segmentation.graphql.cost import (
    EXPORT,
    PROPAGATION,
    RECEIPT,
    file_cost,
    frame_cost,
    import_prompts_check,
)
from segmentation.graphql.types import VIDEO_TYPE
from segmentation.models import Video
from segmentation.selectors import MAX_PAGE_SIZE, video_names, video_of_id, videos_at
from segmentation.services.annotation_imports import session_annotations_import
from segmentation.services.coco_instances import coco_instances_build
from segmentation.services.engines import engine_describe, engine_given_masks_run_model
from segmentation.services.exports import export_convert
from segmentation.services.frame_images import frame_image_get
from segmentation.services.mask_archives import mask_archive_build
from segmentation.services.session_types import FrameMasks, Propagation
from segmentation.services.sessions import (
    session_annotations,
    session_engine,
    session_propagation,
    session_receipt,
)
from segmentation.services.uploads import annotations_read, annotations_video
from segmentation.services.yolo_polygons import yolo_labels_build

logger = logging.getLogger(__name__)

SINGLE_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
CHUNK = 256 * 1024
POSITION_DIGITS = 18  # a byte position of more digits is beyond any file
BEYOND_ANY_FILE = 10**POSITION_DIGITS


@require_safe
def media_file(request: HttpRequest, path: str) -> HttpResponse:
    root = Path(settings.MEDIA_ROOT).resolve()
    try:
        file = (root / path).resolve()
    except ValueError:  # a NUL byte, which no file name holds
        raise Http404("no such file") from None
    if not file.is_relative_to(root) or not file.is_file() or file.name.startswith("."):
        raise Http404("no such file")
    size = file.stat().st_size
    content_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    wanted = _range(request.headers.get("Range", ""), size)
    if wanted is None:
        response: HttpResponse = FileResponse(file.open("rb"), content_type=content_type)
    elif wanted == "unsatisfiable":
        response = HttpResponse(status=416, headers={"Content-Range": f"bytes */{size}"})
    else:
        start, end = wanted
        response = StreamingHttpResponse(
            _read(file, start, end - start + 1), status=206, content_type=content_type
        )
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Content-Length"] = str(end - start + 1)
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "public, max-age=3600"
    return response


def _range(header: str, size: int) -> tuple[int, int] | str | None:
    """The inclusive byte range asked for, "unsatisfiable", or None for the whole file.

    A position of more digits than any file's size has is taken as past every file (Python
    refuses to read an integer of over 4,300 digits, and one of 5,000 was a 500): a first byte
    there is unsatisfiable, a last byte or a suffix there means to the end."""
    match = SINGLE_RANGE.match(header.strip())
    if match is None or match.groups() == ("", ""):
        return None
    first, last = (_position(digits) for digits in match.groups())
    if first is None:  # the last N bytes
        start, end = max(size - last, 0), size - 1
    else:
        start = first
        end = min(last, size - 1) if last is not None else size - 1
    if start >= size or start > end:
        return "unsatisfiable"
    return start, end


def _position(digits: str) -> int | None:
    if not digits:
        return None
    return int(digits) if len(digits) <= POSITION_DIGITS else BEYOND_ANY_FILE


def _read(file: Path, start: int, length: int):
    with file.open("rb") as handle:
        handle.seek(start)
        while length > 0:
            block = handle.read(min(CHUNK, length))
            if not block:
                return
            length -= len(block)
            yield block


STREAM_BOUNDARY = "frame"


@require_safe
def gallery_page(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "segmentation/gallery.html",
        {"nav": "segment", "max_upload_bytes": settings.MAX_UPLOAD_BYTES},
    )


@require_safe
def annotate_page(request: HttpRequest) -> HttpResponse:
    # The page asks GraphQL for the video, whose SAM 2 type has no name: the name comes here.
    video = video_of_id(global_id=request.GET.get("video", ""), kind=VIDEO_TYPE)
    context = {
        "nav": "segment",
        "engine": engine_describe(),
        "video_name": "" if video is None else video.name,
    }
    return render(request, "segmentation/annotate.html", context)


@require_safe
def video_names_view(request: HttpRequest) -> HttpResponse:
    """``GET /videos/names?path=<path>&path=...``: ``{"names": {path: name}}``, the names the
    gallery shows (the SAM 2 ``Video`` type has no field for them); unknown paths are left out."""
    paths = request.GET.getlist("path")
    if len(paths) > MAX_PAGE_SIZE:
        return _error(
            400, ErrorCode.BAD_USER_INPUT, f"at most {MAX_PAGE_SIZE} paths, got {len(paths)}"
        )
    return JsonResponse({"names": video_names(paths=paths)})


@require_safe
def frame_image(request: HttpRequest, frame_index: int) -> HttpResponse:
    """``GET /frames/<index>.jpg?video=<path>``: a frame of a library video, exactly as the
    engine sees it, as JPEG."""
    try:
        file = frame_image_get(path=request.GET.get("video", ""), frame_index=frame_index)
    except SegmentationError as error:
        return _refusal(error)
    response = HttpResponse(file.read_bytes(), content_type="image/jpeg")
    # A path names one video for good (uploads get new paths), so its frames never change.
    response["Cache-Control"] = "public, max-age=86400"
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
    ``segmentation/graphql/cost.py``) before it is parsed; the check and the conversion run in an
    export process (``services/exports.py``), killed when the client hangs up."""
    if request.method != "POST":
        return _error(405, ErrorCode.BAD_USER_INPUT, "method not allowed: POST the annotations")
    body = _annotation_body(request)
    try:
        annotations_bound(body, max_bytes=settings.MAX_ANNOTATIONS_BYTES)
    except SegmentationError as error:
        return _refusal(error)
    refused = await sync_to_async(_charged)(request, weight=file_cost(len(body)) + EXPORT)
    if refused is not None:
        return refused
    try:
        data, video = await sync_to_async(_parsed)(body)
    except SegmentationError as error:
        return _refusal(error)
    stop = threading.Event()

    def convert() -> tuple[str, bytes]:
        return export_convert(build=build, data=data, video=video.shape, stop=stop)

    try:
        name, content = await call_in_thread(_stoppable(request, convert), stop=stop, name="export")
    except SegmentationError as error:
        return _refusal(error)
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = _attachment(name)
    return response


def _annotation_body(request: HttpRequest) -> bytes:
    """The request's body, an annotation file: read no further than a byte past the cap (a
    longer one is refused by its length alone, :func:`annotations_parse`)."""
    return request.read(settings.MAX_ANNOTATIONS_BYTES + 1)


def _parsed(body: bytes) -> tuple[object, Video]:
    """The annotation file, parsed with bounded memory, and the video it is of (looked up here,
    in the thread of sync views: the work's own thread reads no database)."""
    data = annotations_parse(body, max_bytes=settings.MAX_ANNOTATIONS_BYTES)
    return data, annotations_video(data)


Result = TypeVar("Result")


def _stoppable(request: HttpRequest, work: Callable[[], Result]) -> Callable[[], Result]:
    """``work`` as its own thread runs it, saying in the log when it stopped because its
    client went away."""

    def run() -> Result:
        try:
            return work()
        except Stopped:
            logger.info("%s stopped: the client went away", request.path)
            raise

    return run


def _charged(request: HttpRequest, *, weight: int) -> JsonResponse | None:
    """Count ``weight`` (capped: ``rate_limit_capped``) against the client's cost limit,
    refused or not; the 429 if it is over."""
    rate = settings.RATE_LIMIT_COST
    wait = rate_limit_wait(
        address=client_address(request),
        kind="cost",
        rate=rate,
        weight=rate_limit_capped(weight, rate=rate),
    )
    if wait is None:
        return None
    return rate_limit_refusal(path=request.path, what="work", wait=wait)


@require_safe
def annotations_export(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /annotations/<session_id>.json``: the session's masks, as a download."""
    try:
        annotations = session_annotations(session_id=session_id)
    except SegmentationError as error:
        return _refusal(error)
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
async def annotations_import(request: HttpRequest, session_id: str) -> HttpResponse:
    """``POST /sessions/<session_id>/annotations`` with an annotation file of the session's
    video: its clicks and masks become the session's prompts, in place of its own, or with
    ``?append=1`` on top of them. Answers ``{"frames": [{"frame_index", "objects"}]}``, the
    masks of the file's frames. Charged as reading the file, then frame by frame as the
    ``addPoints`` it replays; stopped, keeping what it did, by the client's limit or the
    session's engine budget (``annotation_imports.py``): 429 with what was imported. Checked
    and imported in a thread of its own, which stops at its next mask or frame, keeping the
    frames imported, when the client hangs up. With ``?replay=<receipt>``, the work of the lost
    session the receipt names, not metered by the engine budget as far as the receipt covers
    it."""
    if request.method != "POST":
        return _error(405, ErrorCode.BAD_USER_INPUT, "method not allowed: POST the annotations")
    append = request.GET.get("append", "0")
    if append not in ("0", "1"):
        return _error(400, ErrorCode.BAD_USER_INPUT, "append must be 0 or 1")
    replay = request.GET.get("replay", "")
    body = _annotation_body(request)
    try:
        annotations_bound(body, max_bytes=settings.MAX_ANNOTATIONS_BYTES)
    except SegmentationError as error:
        return _refusal(error)
    refused = await sync_to_async(_charged)(request, weight=file_cost(len(body)))
    if refused is not None:
        return refused
    meter = _FrameMeter(
        CostMeter(address=client_address(request), kind="cost", rate=settings.RATE_LIMIT_COST),
        given_masks_run_model=engine_given_masks_run_model(),
    )
    try:
        data, video = await sync_to_async(_parsed)(body)
    except SegmentationError as error:
        return _refusal(error)
    stop = threading.Event()

    def give() -> list[FrameMasks]:
        annotations = annotations_read(data, video=video, stop=stop)
        import_prompts_check(annotations, max_cost=settings.GRAPHQL_MAX_COST)
        return session_annotations_import(
            session_id=session_id,
            annotations=annotations,
            append=append == "1",
            meter=meter,
            stop=stop,
            replay=replay,
        )

    try:
        frames = await call_in_thread(_stoppable(request, give), stop=stop, name="import")
    except SegmentationError as error:
        return _refusal(error)
    return JsonResponse(
        {
            "frames": [
                {
                    "frame_index": frame.frame_index,
                    "objects": [mask.as_message() for mask in frame.objects],
                }
                for frame in frames
            ]
        }
    )


class _FrameMeter:
    """The client's cost limit, charged a frame's prompts as the ``addPoints`` they replay
    (``annotation_imports.ImportMeter``), its given masks as the engine takes them."""

    def __init__(self, meter: CostMeter, *, given_masks_run_model: bool) -> None:
        self.meter = meter
        self.given_masks_run_model = given_masks_run_model

    def take(self, frame: FrameMasks) -> int | None:
        cost = frame_cost(frame, given_masks_run_model=self.given_masks_run_model)
        return self.meter.take(cost)

    def give_back(self) -> None:
        self.meter.give_back()


@require_safe
def session_engine_view(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /sessions/<session_id>/engine``: ``{"engine"}``, what answers the session."""
    try:
        return JsonResponse({"engine": session_engine(session_id=session_id)})
    except SegmentationError as error:
        return _refusal(error)


@require_safe
def session_receipt_view(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /sessions/<session_id>/receipt``: ``{"receipt"}``, what the server has shown the
    session, signed, for a replay of its work should the server lose it; charged to the
    client's cost limit first (``RECEIPT``), a session known or not."""
    refused = _charged(request, weight=RECEIPT)
    if refused is not None:
        return refused
    try:
        return JsonResponse({"receipt": session_receipt(session_id=session_id)})
    except SegmentationError as error:
        return _refusal(error)


@csrf_exempt
async def propagate_in_video(request: HttpRequest) -> HttpResponse:
    """``POST /propagate_in_video`` ``{"session_id", "start_frame_index"}`` (and optionally
    ``"direction"``, ``"end_frame_index"``): the masks of every frame as they are computed, one
    part per frame of a ``multipart/x-savi-stream``."""
    if request.method != "POST":
        return _error(405, ErrorCode.BAD_USER_INPUT, "method not allowed: POST a JSON body")
    wait = await sync_to_async(rate_limit_wait)(
        address=client_address(request),
        kind="cost",
        rate=settings.RATE_LIMIT_COST,
        weight=PROPAGATION,
    )
    if wait is not None:
        return rate_limit_refusal(path=request.path, what="work", wait=wait)
    try:
        body = json.loads(request.body or b"{}")
        session_id = body["session_id"]
        start = body.get("start_frame_index", 0)
        if start is None:
            start = 0
        if not isinstance(session_id, str) or isinstance(start, bool) or not isinstance(start, int):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nested too deep
        return _error(
            400,
            ErrorCode.BAD_USER_INPUT,
            'the body must be JSON {"session_id": "<id>", "start_frame_index": <integer>}',
        )
    # The range's fields are optional (the SAM 2 demo sends neither); their values are checked
    # against the video by the session's host, before anything runs.
    direction = body.get("direction", "both")
    end = body.get("end_frame_index")
    if not isinstance(direction, str):
        return _error(
            400,
            ErrorCode.BAD_USER_INPUT,
            f'direction must be "both", "forward" or "backward", got {direction!r}',
        )
    if end is not None and (isinstance(end, bool) or not isinstance(end, int)):
        return _error(
            400, ErrorCode.BAD_USER_INPUT, f"end_frame_index must be an integer, got {end!r}"
        )
    try:
        propagation = await session_propagation(
            session_id=session_id, start_frame_index=start, direction=direction, end_frame_index=end
        )
    except SegmentationError as error:
        return _refusal(error)
    response = StreamingHttpResponse(
        _multipart(propagation), content_type=f"multipart/x-savi-stream; boundary={STREAM_BOUNDARY}"
    )
    response["Cache-Control"] = "no-cache"
    return response


async def _multipart(propagation: Propagation) -> AsyncIterator[bytes]:
    # Closing this stream (the client went away) closes the propagation's at once.
    async with contextlib.aclosing(propagation.frames) as frames:
        async for frame in frames:
            results = [mask.as_message() for mask in frame.objects]
            body = json.dumps(
                {"frame_index": frame.frame_index, "results": results}, separators=(",", ":")
            ).encode()
            head = (
                f"--{STREAM_BOUNDARY}\r\n"
                "Content-Type: application/json; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\n"
                f"Frame-Current: {frame.frame_index}\r\n"
                f"Frame-Total: {propagation.frame_count}\r\n"
                "Mask-Type: RLE[]\r\n\r\n"
            )
            yield head.encode() + body + b"\r\n"


def _refusal(error: SegmentationError) -> JsonResponse:
    """The service's error, answered with the status its code carries, what else it says
    (``details``) and, if it says when to come back, ``Retry-After``."""
    response = _error(error.code.http_status, error.code, error.message, **error.details)
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:
        response["Retry-After"] = str(math.ceil(retry_after))
    return response


def _error(status: int, code: ErrorCode, message: str, **details: object) -> JsonResponse:
    return JsonResponse({"error": message, "code": code.value, **details}, status=status)


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
