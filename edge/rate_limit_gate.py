"""A client already over its cost limit (:mod:`core.rate_limits`) is answered 429 in front of
Django, after a pause."""

from __future__ import annotations

import asyncio
import functools
import re

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache.backends.locmem import LocMemCache

from core.client_address import address_of
from core.rate_limits import rate_limit_refusal, rate_limit_wait
from edge.body_limit import App, Receive, Scope, Send, response_send, with_cors

TARPIT_SEC = 1.0


class RateLimitGate:
    """ASGI middleware: a client already over its cost limit is answered 429 before Django sees
    its request, and only after :data:`TARPIT_SEC`. Django's handling of one request costs this
    server about 4 ms of CPU, daphne's under 1 ms, so a refused request costs a fifth as much
    here; and as a client that sends again at once waits a second for each answer, a flood is
    held to a request a second per connection, which leaves the CPU to the other clients. What
    counts is done later, where the cost is known (``edge/graphql.py``, the propagation
    view, the annotation import and exports); here the counter is only read."""

    def __init__(
        self, app: App, *, paths: frozenset[str], path_pattern: re.Pattern[str] | None = None
    ) -> None:
        self.app = app
        self.paths = paths
        self.path_pattern = path_pattern  # more paths, by a pattern they match in full

    def _gated(self, path: str) -> bool:
        if path in self.paths:
            return True
        return self.path_pattern is not None and self.path_pattern.fullmatch(path) is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and self._gated(scope["path"]):
            wait = await self._wait(scope)
            if wait is not None:
                await asyncio.sleep(min(wait, TARPIT_SEC))
                response = rate_limit_refusal(path=scope["path"], what="work", wait=wait)
                headers = scope.get("headers", [])
                await response_send(
                    with_cors(response, method="POST", path=scope["path"], headers=headers), send
                )
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _wait(scope: Scope) -> int | None:
        headers = dict(scope.get("headers", []))
        peer = (scope.get("client") or ("", 0))[0]
        forwarded_for = headers.get(b"x-forwarded-for", b"").decode("latin-1")
        address = address_of(peer, forwarded_for)
        look = functools.partial(
            rate_limit_wait, address=address, kind="cost", rate=settings.RATE_LIMIT_COST, weight=0
        )
        if isinstance(caches[DEFAULT_CACHE_ALIAS], LocMemCache):
            return look()  # in this process's memory: no waiting on anything
        return await sync_to_async(look, thread_sensitive=False)()
