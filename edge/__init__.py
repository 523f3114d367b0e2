"""The HTTP edge both apps sit behind: the server (daphne, with its caps on heads, bodies and slow
clients), the ASGI middleware (body limit, rate-limit gate, static files, memory return), the
WebSocket admission and closes, the cross-site check, the GraphQL endpoint with its limits and
schema, the admin login's throttle, ``/healthz``, the documentation pages and the site's icon.

What it needs from the apps at run time (the GraphQL cost table, the health fields, a hook at
shutdown) the apps register in their ``AppConfig.ready()`` (:mod:`core.edge_registry`); it
imports an app only to compose the root GraphQL schema (``schema.py``) and to word an annotation
file's refusal as the app does (``body_limit.py``). ``__version__`` is the version ``/healthz``
reports."""

from __future__ import annotations

__version__ = "0.1.0"
