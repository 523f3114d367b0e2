"""What a client may ask of its session beside GraphQL: what answers it (its engine), and its
receipt, what the server has shown it, signed, for a replay of its work should the server lose
it (``services/local_sessions.py``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from segmentation.errors import SegmentationError
from segmentation.services.engine_prices import RECEIPT
from segmentation.services.sessions import session_engine, session_receipt, session_work
from segmentation.views.cost_charges import charged
from segmentation.views.responses import refusal


@require_safe
def session_engine_view(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /sessions/<session_id>/engine``: ``{"engine", "keeps_work"}``, what answers the
    session, and whether it keeps its work in the store (its exports are then streamed from
    there: ``views/exports.py``)."""
    try:
        engine = session_engine(session_id=session_id)
        keeps_work = session_work(session_id=session_id) is not None
        return JsonResponse({"engine": engine, "keeps_work": keeps_work})
    except SegmentationError as error:
        return refusal(error)


@require_safe
def session_receipt_view(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /sessions/<session_id>/receipt``: ``{"receipt"}``, what the server has shown the
    session, signed, for a replay of its work should the server lose it; charged to the
    client's cost limit first (``RECEIPT``), a session known or not."""
    refused = charged(request, weight=RECEIPT)
    if refused is not None:
        return refused
    try:
        return JsonResponse({"receipt": session_receipt(session_id=session_id)})
    except SegmentationError as error:
        return refusal(error)
