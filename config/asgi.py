"""ASGI entry point: the edge's application (``edge/asgi_app.py``), built once Django is set up."""

from __future__ import annotations

import gc
import os

from edge.django_handler import django_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# Build the Django application (and so load the app registry, where the apps register what the
# edge needs from them) before anything imports models.
django_application = django_asgi_application()

from edge.asgi_app import asgi_application  # noqa: E402

application = asgi_application(django_application)

# Python's cyclic collector, at its default threshold, runs every 700 allocations and now and
# then rescans every live object; with thousands of viewers each holding a consumer, tasks and
# buffers, that rescanning grew faster than the viewer count and set the fan-out's ceiling. The
# objects of start-up are frozen out of it and collections come every 50,000 allocations.
gc.collect()
gc.freeze()
gc.set_threshold(50_000, 20, 100)
