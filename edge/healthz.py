"""``GET /healthz``: liveness and database reachability for probes and load balancers, with the
fields the apps register (core/edge_registry.py: the segmentation engine, what answers, and why
it was chosen)."""

from __future__ import annotations

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from core.edge_registry import health_fields
from edge import __version__


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    body = {"status": "ok", "version": __version__, **health_fields()}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        return JsonResponse({**body, "status": "error", "detail": str(error)}, status=503)
    return JsonResponse(body)
