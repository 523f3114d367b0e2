from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string


def test_every_middleware_can_run_async() -> None:
    """One sync-only middleware would make Django run async views (the channel admin's, which
    drive the hub on the server's event loop) in a thread with a loop of their own."""
    # Django takes a middleware without the attribute to be sync only.
    sync_only = [
        path
        for path in settings.MIDDLEWARE
        if not getattr(import_string(path), "async_capable", False)
    ]

    assert sync_only == []
