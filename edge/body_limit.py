"""A cap on request bodies, by path, enforced while they arrive.

Django reads a whole body (into a temporary file) before any view runs, so a view cannot refuse
an upload that is too large until all of it has arrived. The cap therefore sits in front of
Django, in two places that give the same answer:

- :class:`RequestBodyLimit`, an ASGI middleware, for servers that hand the application a body as
  it arrives (uvicorn): a declared ``Content-Length`` over the cap is refused at once, and a body
  that grows past it (chunked, or lying about its length) as soon as it does.
- ``edge/server.py``, for daphne, which receives a whole body before the application sees any
  of it: there the cap sits in daphne's request class, inside the server.

The cap depends on the path (:func:`body_cap`, the one table): the paths an app registered a
cap of its own for (:class:`core.edge_registry.BodyCap`: the segmentation app's annotation
endpoints, the exports and the import, take at most ``MAX_ANNOTATIONS_MB``) take that,
everything else the upload limit, ``MAX_UPLOAD_MB`` and a form's other fields. With the upload
limit everywhere, 70 MB posted to an export arrived whole before the view refused it (36 such
posts held ``/healthz`` at 13x, issue 47). The refusal is the path's own error: a GraphQL-shaped
error for uploads (they come through the GraphQL endpoint), the registered cap's refusal (the
segmentation views' JSON error) at its paths, both with the code ``UPLOAD_TOO_LARGE`` and the
CORS headers django-cors-headers would give, so that a cross-origin page can read it.

A body refused at its head is still read, and dropped, until the client has sent it, so that the
client reads the answer rather than a reset (as nginx's lingering close does). That reading is
the server's work, as fast as the client sends: 70 MB posts sent back to back over loopback cost
the event loop three quarters of a core and held ``/healthz`` at 2.6 to 4.9 times its calm
latency (issue 47). So the refused bodies of the process drain at ``SERVER_REFUSED_DRAIN_MB``
a second between them (:class:`DrainPace`), each connection pausing its reading while it is
ahead of its share; a connection held past the server's linger is cut.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from corsheaders.middleware import CorsMiddleware
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from core.edge_registry import body_cap_of

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# Room for the other fields of a multipart upload (operations, map, part headers).
FORM_OVERHEAD = 64 * 1024


def body_cap(path: str) -> int:
    """The largest request body accepted at ``path``, in bytes: the cap an app registered for
    the path (an annotation file's limit at the annotation endpoints), elsewhere the upload
    limit and a form's other fields."""
    registered = body_cap_of(path)
    if registered is not None:
        return registered.max_bytes()
    return settings.MAX_UPLOAD_BYTES + FORM_OVERHEAD


class DrainPace:
    """Refused bodies drained at most ``rate`` bytes a second in all, allowing a burst of
    ``burst`` seconds' worth: each read's bytes are given the next free stretch of time, and the
    connection that read them pauses its reading until the stretch begins, once that is at least
    ``least_pause`` away (a pause after every read of 256 KB cost three times the CPU a byte of
    one after every 1.6 MB, at 16 MB a second: ``benchmarks/refused_body.py``)."""

    def __init__(
        self,
        *,
        rate: float,
        burst: float = 0.25,
        least_pause: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.least_pause = least_pause
        self._clock = clock
        self._free_at = clock() - burst  # when the bytes taken so far have had their time

    def take(self, size: int) -> float:
        """``size`` bytes drained now: the seconds to pause reading before the next (0: none)."""
        now = self._clock()
        self._free_at = max(self._free_at, now - self.burst) + size / self.rate
        ahead = self._free_at - now
        return ahead if ahead >= self.least_pause else 0.0


def body_refusal(
    *, method: str, path: str, headers: Iterable[tuple[bytes, bytes]], size: int
) -> HttpResponse:
    """The answer to a request whose body, ``size`` bytes (declared, or received so far), is
    over its path's cap: 413 with the code ``UPLOAD_TOO_LARGE`` in the path's own error format,
    the CORS headers for the request's origin, and the connection closed."""
    registered = body_cap_of(path)
    if registered is not None:
        content: dict[str, Any] = dict(registered.refusal(size))
    else:
        megabytes = settings.MAX_UPLOAD_BYTES // (1024 * 1024)
        content = {
            "data": None,
            "errors": [
                {
                    "message": f"the upload is larger than the limit of {megabytes} MB",
                    "extensions": {"code": "UPLOAD_TOO_LARGE"},
                }
            ],
        }
    response = JsonResponse(content, status=413)
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
        limit = body_cap(scope["path"])
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, send, size=int(declared))
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge(received)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except _TooLarge as too_large:
            if not started:
                await self._refuse(scope, send, size=too_large.args[0])

    async def _refuse(self, scope: Scope, send: Send, *, size: int) -> None:
        response = body_refusal(
            method=scope["method"], path=scope["path"], headers=scope.get("headers", []), size=size
        )
        await response_send(response, send)
