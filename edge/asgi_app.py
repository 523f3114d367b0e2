"""The ASGI application: the middleware in front of Django, the apps' consumers routed before
it, and the start-up work the apps registered, done as it is built.

Django must be set up before this module is imported (``config/asgi.py`` builds the Django
application first): the apps' registrations (:mod:`core.edge_registry`) are made as the app
registry loads, and the consumers it routes import models.
"""

from __future__ import annotations

import re
from importlib import import_module

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.conf import settings
from django.urls import re_path

from core.backpressure import PacedStreams
from core.edge_registry import asgi_routes, startup_work
from edge.body_limit import App, RequestBodyLimit
from edge.memory_return import MemoryReturn
from edge.rate_limit_gate import RateLimitGate
from edge.static_files import StaticFiles


def http_application_wrap(django_application: App) -> App:
    """Django behind the edge's middleware, outermost first: memory given back after a large
    request, the rate-limit gate, the paced streams, the body cap, static files."""
    return MemoryReturn(
        RateLimitGate(
            PacedStreams(
                RequestBodyLimit(
                    StaticFiles(django_application) if settings.SERVE_STATIC else django_application
                ),
                # computed as it is read: a slow client slows its propagation or its export,
                # not the server's memory
                frozenset({"/propagate_in_video"}),
                # a session's exports streamed from its stored work (and its annotation file)
                path_pattern=re.compile(
                    r"/annotations/[^/]+(?:\.json|/(?:masks\.zip|coco\.json|yolo\.zip))"
                ),
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


def asgi_application(django_application: App) -> ProtocolTypeRouter:
    """The server's application around ``django_application``, once the apps' start-up work
    is done (each phase's in the order the apps registered it)."""
    http_application = http_application_wrap(django_application)
    for work in startup_work():
        work()
    routes = [import_module(urlconf) for urlconf in asgi_routes()]
    return ProtocolTypeRouter(
        {
            "http": URLRouter(
                [
                    *(pattern for route in routes for pattern in route.http_urlpatterns),
                    re_path(r"", http_application),
                ]
            ),
            "websocket": AllowedHostsOriginValidator(
                AuthMiddlewareStack(
                    URLRouter(
                        [pattern for route in routes for pattern in route.websocket_urlpatterns]
                    )
                )
            ),
        }
    )
