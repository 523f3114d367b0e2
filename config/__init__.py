"""Project configuration: settings, URL and ASGI routing, and the root GraphQL schema."""

from __future__ import annotations

__version__ = "0.1.0"
