"""ASGI entry point: one protocol router for Django views and the Channels consumers."""

from __future__ import annotations

import gc
import os
import re

from edge.django_handler import django_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# Build the Django application (and so load the app registry) before anything imports models.
django_application = django_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import re_path  # noqa: E402

from channels_admin import routing as channels_admin_routing  # noqa: E402
from channels_admin.services.playlists import playlist_ensure_loaded  # noqa: E402
from core.backpressure import PacedStreams  # noqa: E402
from edge.body_limit import RequestBodyLimit  # noqa: E402
from edge.memory_return import MemoryReturn  # noqa: E402
from edge.rate_limit_gate import RateLimitGate  # noqa: E402
from edge.static_files import StaticFiles  # noqa: E402
from segmentation.services.process_engine import engine_announce, engine_get  # noqa: E402

http_application = MemoryReturn(
    RateLimitGate(
        PacedStreams(
            RequestBodyLimit(
                StaticFiles(django_application) if settings.SERVE_STATIC else django_application
            ),
            # computed as it is read: a slow client slows its propagation, not the server's memory
            frozenset({"/propagate_in_video"}),
        ),
        paths=frozenset(
            {
                "/graphql",
                "/propagate_in_video",
                "/annotations/masks.zip",
                "/annotations/coco.json",
                "/annotations/yolo.zip",
            }
        ),
        path_pattern=re.compile(r"/sessions/[^/]+/annotations"),  # the annotation import
    )
)

playlist_ensure_loaded()
# Load the engine now: a bad checkpoint stops the server at start, and no click waits for it.
# With inference workers, they hold the engine and this process none.
if not settings.SEGMENTATION_WORKERS:
    engine_get()
engine_announce()

application = ProtocolTypeRouter(
    {
        "http": URLRouter(
            [*channels_admin_routing.http_urlpatterns, re_path(r"", http_application)]
        ),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(channels_admin_routing.websocket_urlpatterns))
        ),
    }
)

# Python's cyclic collector, at its default threshold, runs every 700 allocations and now and
# then rescans every live object; with thousands of viewers each holding a consumer, tasks and
# buffers, that rescanning grew faster than the viewer count and set the fan-out's ceiling. The
# objects of start-up are frozen out of it and collections come every 50,000 allocations.
gc.collect()
gc.freeze()
gc.set_threshold(50_000, 20, 100)
