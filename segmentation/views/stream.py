"""``POST /propagate_in_video``: the SAM 2 demo's stream of masks.

The engine runs in a thread of its own (it holds the session's lock throughout); parts go out
as frames are done. A client that disconnects closes the stream, which stops the thread at its
next frame, as does ``cancelPropagateInVideo``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from core.client_address import client_address
from core.rate_limits import rate_limit_refusal, rate_limit_wait
from segmentation.errors import ErrorCode, SegmentationError
from segmentation.services.engine_prices import PROPAGATION
from segmentation.services.session_types import Propagation
from segmentation.services.sessions import session_propagation
from segmentation.views.responses import error_response, refusal

STREAM_BOUNDARY = "frame"


@csrf_exempt
async def propagate_in_video(request: HttpRequest) -> HttpResponse:
    """``POST /propagate_in_video`` ``{"session_id", "start_frame_index"}`` (and optionally
    ``"direction"``, ``"end_frame_index"``): the masks of every frame as they are computed, one
    part per frame of a ``multipart/x-savi-stream``."""
    if request.method != "POST":
        return error_response(405, ErrorCode.BAD_USER_INPUT, "method not allowed: POST a JSON body")
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
        return error_response(
            400,
            ErrorCode.BAD_USER_INPUT,
            'the body must be JSON {"session_id": "<id>", "start_frame_index": <integer>}',
        )
    # The range's fields are optional (the SAM 2 demo sends neither); their values are checked
    # against the video by the session's host, before anything runs.
    direction = body.get("direction", "both")
    end = body.get("end_frame_index")
    if not isinstance(direction, str):
        return error_response(
            400,
            ErrorCode.BAD_USER_INPUT,
            f'direction must be "both", "forward" or "backward", got {direction!r}',
        )
    if end is not None and (isinstance(end, bool) or not isinstance(end, int)):
        return error_response(
            400, ErrorCode.BAD_USER_INPUT, f"end_frame_index must be an integer, got {end!r}"
        )
    try:
        propagation = await session_propagation(
            session_id=session_id, start_frame_index=start, direction=direction, end_frame_index=end
        )
    except SegmentationError as error:
        return refusal(error)
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
