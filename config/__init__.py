"""Project configuration: settings, URL and ASGI routing."""

from __future__ import annotations
