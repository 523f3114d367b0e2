"""``GET /healthz``: liveness and database reachability for probes and load balancers."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from config import __version__


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    body = {"status": "ok", "version": __version__, "engine": settings.SEGMENTATION_ENGINE}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        return JsonResponse({**body, "status": "error", "detail": str(error)}, status=503)
    return JsonResponse(body)
