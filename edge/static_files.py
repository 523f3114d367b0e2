"""``/static/`` served by the ASGI application itself (``SERVE_STATIC``), with a path that
leaves the static folders answered as not found.

Django's handler answers a missing file with 404, but a path that resolves outside its folders
(``/static/../config/settings.py`` sent as written; browsers and most clients remove the ``..``
before sending) raises ``SuspiciousFileOperation`` outside Django's request handling, where
daphne answers 500 and logs a traceback. Nothing was served; now the answer is a 404 too.
"""

from __future__ import annotations

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404, HttpRequest, HttpResponse


class StaticFiles(ASGIStaticFilesHandler):
    def serve(self, request: HttpRequest) -> HttpResponse:
        try:
            return super().serve(request)
        except SuspiciousFileOperation:
            raise Http404("no such file") from None
