"""ASGI entry point: one protocol router for Django views and the Channels consumers."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# Build the Django application (and so load the app registry) before anything imports models.
django_application = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

http_application = (
    ASGIStaticFilesHandler(django_application) if settings.SERVE_STATIC else django_application
)

application = ProtocolTypeRouter({"http": http_application})
