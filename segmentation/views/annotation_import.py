"""``POST /sessions/<id>/annotations``: an annotation file's work given to a session (the
annotator's Import), beside GraphQL because the SAM 2 schema is fixed; with ``?replay=`` the
receipt of a session the server lost (``GET /sessions/<id>/receipt``), whose work it gives back
without metering it again (``services/local_sessions.py``).

The import checks the file, then imports it, in a thread of its own (``core/threads.py``'s
``call_in_thread``): a client that hangs up stops it at its next frame, without holding the
event loop or the thread that runs sync views meanwhile.
"""

from __future__ import annotations

import threading

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from core.client_address import client_address
from core.rate_limits import CostMeter
from core.threads import call_in_thread
from segmentation.annotation_json import annotations_bound
from segmentation.errors import ErrorCode, SegmentationError
from segmentation.services.annotation_imports import session_annotations_import
from segmentation.services.engine_prices import file_cost, frame_cost, import_prompts_check
from segmentation.services.process_engine import engine_given_masks_run_model
from segmentation.services.session_types import FrameMasks
from segmentation.services.uploads import annotations_read
from segmentation.views.annotation_posts import annotation_body, annotation_parsed, stoppable
from segmentation.views.cost_charges import charged
from segmentation.views.responses import error_response, refusal


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
        return error_response(
            405, ErrorCode.BAD_USER_INPUT, "method not allowed: POST the annotations"
        )
    append = request.GET.get("append", "0")
    if append not in ("0", "1"):
        return error_response(400, ErrorCode.BAD_USER_INPUT, "append must be 0 or 1")
    replay = request.GET.get("replay", "")
    body = annotation_body(request)
    try:
        annotations_bound(body, max_bytes=settings.MAX_ANNOTATIONS_BYTES)
    except SegmentationError as error:
        return refusal(error)
    refused = await sync_to_async(charged)(request, weight=file_cost(len(body)))
    if refused is not None:
        return refused
    meter = _FrameMeter(
        CostMeter(address=client_address(request), kind="cost", rate=settings.RATE_LIMIT_COST),
        given_masks_run_model=engine_given_masks_run_model(),
    )
    try:
        data, video = await sync_to_async(annotation_parsed)(body)
    except SegmentationError as error:
        return refusal(error)
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
        frames = await call_in_thread(stoppable(request, give), stop=stop, name="import")
    except SegmentationError as error:
        return refusal(error)
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
