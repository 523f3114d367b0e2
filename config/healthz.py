"""``GET /healthz``: liveness and database reachability for probes and load balancers."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from config import __version__
from segmentation.services.process_engine import engine_describe


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    body = {
        "status": "ok",
        "version": __version__,
        "engine": settings.SEGMENTATION_ENGINE,
        # what answers and why: "EdgeTAM on cpu (bfloat16)", "edgetam.pt in var/models"
        "engine_model": engine_describe(),
        "engine_chosen_because": settings.SEGMENTATION_ENGINE_CHOICE.reason,
    }
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        return JsonResponse({**body, "status": "error", "detail": str(error)}, status=503)
    return JsonResponse(body)
