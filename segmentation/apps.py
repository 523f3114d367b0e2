from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class SegmentationConfig(AppConfig):
    name = "segmentation"
    verbose_name = "Video segmentation"

    def ready(self) -> None:
        # A bad engine name or option stops start-up here, not at the first click.
        from segmentation.engines import EngineConfigError, engine_options

        try:
            engine_options(settings.SEGMENTATION_ENGINE, settings.SEGMENTATION_ENGINE_OPTIONS)
        except EngineConfigError as error:
            raise ImproperlyConfigured(
                f"SEGMENTATION_ENGINE={settings.SEGMENTATION_ENGINE!r} "
                f"(options from SEGMENTATION_ENGINE_OPTIONS): {error}"
            ) from None
        _session_host_wire()


def _session_host_wire() -> None:
    """Give the session services their host (``services/sessions.py``): the inference workers'
    client when ``SEGMENTATION_WORKERS`` is on, else this process's own sessions. Each is made
    on its first use; the one not chosen is not imported."""
    from segmentation.services.sessions import session_host_provide

    if settings.SEGMENTATION_WORKERS:
        from segmentation.workers.client import worker_client

        session_host_provide(worker_client)
    else:
        from segmentation.services.local_sessions import local_sessions

        session_host_provide(local_sessions)
