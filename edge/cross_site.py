"""Other websites cannot make a visitor's browser change anything here.

The API views are CSRF-exempt (the SAM 2 demo frontend calls them from another origin and sends
no CSRF token), and ``/graphql`` takes form-encoded and multipart bodies, which a browser sends
from any page without asking first (no CORS preflight). CORS only stops the page from reading
the answer; the mutation would already have run. So, for the CSRF-exempt views that CORS governs
(everything but the channel admin API, which ``channels_admin/access.py`` guards), a request
with an unsafe method is refused with 403 before its view runs when the browser says it comes
from a page of another origin that the CORS settings do not allow:

- ``Origin`` names the page's origin: allowed when its host and port are this server's (the
  scheme may differ behind a TLS proxy) or CORS allows it (``CORS_ALLOWED_ORIGINS``, and by
  default any port of localhost, where the SAM 2 demo frontend runs);
- without ``Origin``, ``Sec-Fetch-Site: cross-site`` is refused.

Clients that are not browsers send neither header and are not affected: they carry no visitor's
credentials, which is what a cross-site request abuses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from corsheaders.conf import conf as cors_conf
from corsheaders.middleware import CorsMiddleware
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from graphene_django.views import GraphQLView

logger = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
CODE = "CROSS_SITE_REFUSED"


class CrossSiteRefusal(MiddlewareMixin):
    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        self._cors = CorsMiddleware(get_response)

    async def process_view(
        self, request: HttpRequest, view: Callable, args: tuple, kwargs: dict
    ) -> HttpResponse | None:
        # a coroutine, so that the server's handler calls it on its loop rather than in a
        # thread of its own: it waits on nothing
        if request.method in SAFE_METHODS or not getattr(view, "csrf_exempt", False):
            return None  # Django's CSRF check covers the others
        if not self._cors.is_enabled(request):
            return None
        origin = self._foreign_origin(request)
        if origin is None:
            return None
        logger.warning("refused a cross-site %s %s from %r", request.method, request.path, origin)
        message = f"cross-site request refused: {origin} is not an allowed origin"
        view_class = getattr(view, "view_class", None)
        if isinstance(view_class, type) and issubclass(view_class, GraphQLView):
            body = {"data": None, "errors": [{"message": message, "extensions": {"code": CODE}}]}
        else:
            body = {"error": message, "code": CODE}
        return JsonResponse(body, status=403)

    def _foreign_origin(self, request: HttpRequest) -> str | None:
        """The page's origin if it is another site's that CORS does not allow, else ``None``."""
        origin = request.headers.get("Origin")
        if origin is None:
            fetch_site = request.headers.get("Sec-Fetch-Site")
            return "another site" if fetch_site == "cross-site" else None
        parts = urlsplit(origin)
        try:
            if parts.netloc and parts.netloc == request.get_host():
                return None
        except DisallowedHost:
            pass
        if cors_conf.CORS_ALLOW_ALL_ORIGINS or self._cors.origin_found_in_white_lists(
            origin, parts
        ):
            return None
        return origin
