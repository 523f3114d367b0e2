"""The process's segmentation engine: built once, on first use, from the settings."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from segmentation.engines import engine_create
from segmentation.engines.base import Engine


@cache
def engine_get() -> Engine:
    return engine_create(settings.SEGMENTATION_ENGINE, settings.SEGMENTATION_ENGINE_OPTIONS)


def engine_describe() -> str:
    """What answers this process's sessions, for the pages: the engine's own words; with
    inference workers, which hold the sessions and their engines, only that."""
    if settings.SEGMENTATION_WORKERS:
        return "inference workers"
    return engine_get().describe()
