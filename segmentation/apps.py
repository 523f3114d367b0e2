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
