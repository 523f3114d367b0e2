"""Who may use the admin API: staff users, holders of the admin token, and — only while no
token is configured — requests from this machine (loopback) that no proxy forwarded.

Behind a reverse proxy on the same machine every request arrives from loopback; the proxy's
headers (``X-Forwarded-For`` and the like, which docs/deploy.md's nginx sets) are what tell
such a request from one made here, so a request carrying any of them is not "this machine"."""

from __future__ import annotations

import enum
import hmac

from django.conf import settings
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware

from channels_admin.errors import ErrorCode
from core.client_address import came_through_proxy, peer_is_loopback


class Denied(enum.Enum):
    """Why a request may not use the admin API: its code (which carries the status), its text."""

    UNAUTHENTICATED = (ErrorCode.UNAUTHENTICATED, "authentication required")
    BAD_TOKEN = (ErrorCode.UNAUTHENTICATED, "invalid admin token")
    NOT_STAFF = (ErrorCode.FORBIDDEN, "staff access required")
    CSRF = (ErrorCode.FORBIDDEN, "CSRF check failed")
    CROSS_SITE = (ErrorCode.FORBIDDEN, "cross-site request refused")

    @property
    def code(self) -> ErrorCode:
        return self.value[0]

    @property
    def text(self) -> str:
        return self.value[1]


def admin_access_check(request: HttpRequest) -> Denied | None:
    """``None`` when the request may use the admin API, else why it may not."""
    token = settings.CHANNELS_ADMIN_TOKEN
    authorization = request.headers.get("Authorization", "")
    if token and authorization.startswith("Bearer "):
        offered = authorization.removeprefix("Bearer ").strip()
        return None if hmac.compare_digest(offered.encode(), token.encode()) else Denied.BAD_TOKEN
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        if not user.is_staff:
            return Denied.NOT_STAFF
        # A session cookie rides along with any request the browser makes: demand the token.
        rejected = CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})
        return Denied.CSRF if rejected is not None else None
    if not token and _from_loopback(request):
        # The admin's own browser also runs on this machine: refuse what other sites make it send.
        return Denied.CROSS_SITE if _cross_site(request) else None
    return Denied.UNAUTHENTICATED


def _from_loopback(request: HttpRequest) -> bool:
    return peer_is_loopback(request) and not came_through_proxy(request)


def _cross_site(request: HttpRequest) -> bool:
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in {"same-origin", "none"}:
        return True
    origin = request.headers.get("Origin")
    return origin is not None and origin != f"{request.scheme}://{request.get_host()}"
