"""The HTTP edge both apps sit behind: the server (daphne, with its caps on heads, bodies and slow
clients), the ASGI middleware (body limit, rate-limit gate, static files, memory return), the
WebSocket admission and closes, the cross-site check, the GraphQL endpoint with its limits and
schema, the admin login's throttle, ``/healthz``, the documentation pages and the site's icon.

It imports no app: what it needs from them (the GraphQL cost table, the health fields) the apps
register in their ``AppConfig.ready()`` (:mod:`core.edge_registry`)."""

from __future__ import annotations

__version__ = "0.1.0"
