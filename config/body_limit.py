"""A cap on request bodies, enforced while they arrive.

Django reads a whole body (into a temporary file) before any view runs, so a view cannot refuse
an upload that is too large until all of it has arrived. The cap therefore sits in front of
Django, in two places that give the same answer:

- :class:`RequestBodyLimit`, an ASGI middleware, for servers that hand the application a body as
  it arrives (uvicorn): a declared ``Content-Length`` over the cap is refused at once, and a body
  that grows past it (chunked, or lying about its length) as soon as it does.
- ``config/server.py``, for daphne, which receives a whole body before the application sees any
  of it: there the cap sits in daphne's request class, inside the server.

The refusal is a GraphQL-shaped error (uploads come through the GraphQL endpoint) carrying the
CORS headers django-cors-headers would give, so that a cross-origin page can read it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from corsheaders.middleware import CorsMiddleware
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# Room for the other fields of a multipart upload (operations, map, part headers).
FORM_OVERHEAD = 64 * 1024


def body_cap() -> int:
    """The largest request body accepted, in bytes: the upload limit and a form's other fields."""
    return settings.MAX_UPLOAD_BYTES + FORM_OVERHEAD


def body_refusal(*, method: str, path: str, headers: Iterable[tuple[bytes, bytes]]) -> HttpResponse:
    """The answer to a request whose body is over the cap: 413, a GraphQL error with the code
    ``UPLOAD_TOO_LARGE``, the CORS headers for the request's origin, and the connection closed."""
    megabytes = settings.MAX_UPLOAD_BYTES // (1024 * 1024)
    response = JsonResponse(
        {
            "data": None,
            "errors": [
                {
                    "message": f"the upload is larger than the limit of {megabytes} MB",
                    "extensions": {"code": "UPLOAD_TOO_LARGE"},
                }
            ],
        },
        status=413,
    )
    response["Connection"] = "close"
    return with_cors(response, method=method, path=path, headers=headers)


def with_cors(
    response: HttpResponse, *, method: str, path: str, headers: Iterable[tuple[bytes, bytes]]
) -> HttpResponse:
    """``response``, answered in front of Django, with its length and the CORS headers
    django-cors-headers would give the request (so that a cross-origin page can read it)."""
    response["Content-Length"] = str(len(response.content))
    request = HttpRequest()
    request.method = method
    request.path = request.path_info = path
    for name, value in headers:
        if name.lower() == b"origin":
            request.META["HTTP_ORIGIN"] = value.decode("latin-1")
    return CorsMiddleware(lambda _request: response)(request)


async def response_send(response: HttpResponse, send: Send) -> None:
    """Send a Django response built in front of Django over ASGI."""
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.items()],
        }
    )
    await send({"type": "http.response.body", "body": response.content})


class _TooLarge(Exception):
    pass


class RequestBodyLimit:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = body_cap()
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except _TooLarge:
            if not started:
                await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        response = body_refusal(
            method=scope["method"], path=scope["path"], headers=scope.get("headers", [])
        )
        await response_send(response, send)
