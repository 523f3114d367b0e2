"""The HTTP edge both apps sit behind: the server (daphne, with its caps on heads, bodies and slow
clients), the ASGI application and its middleware (body limit, rate-limit gate, static files,
memory return), the WebSocket admission and closes, the cross-site check, the GraphQL endpoint
with its limits and schema, the admin login's throttle, ``/healthz``, the documentation pages and
the site's icon.

It imports no app (an import-linter contract says so): what it needs from them (their parts of
the GraphQL schema and its cost table, the health fields, the start-up work, their consumers'
routes, a body cap of their own with its refusal, a hook at shutdown) the apps register in their
``AppConfig.ready()`` (:mod:`core.edge_registry`). ``__version__`` is the version ``/healthz``
reports."""

from __future__ import annotations

__version__ = "0.1.0"
