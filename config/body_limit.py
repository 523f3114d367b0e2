"""A cap on request bodies, enforced in front of Django.

Django's ASGI handler reads a whole body (into a temporary file) before any view runs, so a
view cannot refuse an upload that is too large until all of it has been read. This middleware
sits in front: a declared ``Content-Length`` over the cap is refused at once, and a body that
grows past it (chunked, or lying about its length) as soon as it does, without reading further.
The refusal is a GraphQL-shaped error, as uploads come through the GraphQL endpoint.

How early that is depends on the server. uvicorn hands the application a body as it arrives, so
the refusal comes mid-upload. daphne (Twisted) receives the whole body before the application
sees any of it; the refusal then saves Django's reading and parsing, and a reverse proxy's body
limit (nginx ``client_max_body_size``) is what stops the bytes at the door.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# Room for the other fields of a multipart upload (operations, map, part headers).
FORM_OVERHEAD = 64 * 1024


class _TooLarge(Exception):
    pass


class RequestBodyLimit:
    def __init__(self, app: App, *, limit_bytes: int, code: str = "UPLOAD_TOO_LARGE") -> None:
        self.app = app
        self.limit = limit_bytes + FORM_OVERHEAD
        self.message = f"the upload is larger than the limit of {limit_bytes // (1024 * 1024)} MB"
        self.code = code

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
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
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {"data": None, "errors": [{"message": self.message, "extensions": {"code": self.code}}]}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
