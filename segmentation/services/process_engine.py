"""The process's segmentation engine: built once, on first use, from the settings."""

from __future__ import annotations

import logging
from functools import cache

from django.conf import settings

from segmentation.engines import engine_class, engine_create
from segmentation.engines.base import Engine

logger = logging.getLogger(__name__)


@cache
def engine_get() -> Engine:
    return engine_create(settings.SEGMENTATION_ENGINE, settings.SEGMENTATION_ENGINE_OPTIONS)


def engine_given_masks_run_model() -> bool:
    """Whether the sessions' engine runs its model on a mask given as a prompt
    (:attr:`Engine.given_masks_run_model`). The engine's class answers, so a web process whose
    sessions live in inference workers, which holds no engine, answers as they would."""
    return engine_class(settings.SEGMENTATION_ENGINE).given_masks_run_model


def engine_describe() -> str:
    """What answers this process's sessions, for the pages: the engine's own words; with
    inference workers, which hold the sessions and their engines, only that."""
    if settings.SEGMENTATION_WORKERS:
        return "inference workers"
    return engine_get().describe()


def engine_announce() -> str:
    """Log, once at start-up, which engine answers and why it was chosen; the line logged."""
    describe = engine_describe()
    if settings.SEGMENTATION_WORKERS:
        describe = f"{settings.SEGMENTATION_ENGINE} in {describe}"
    line = f"segmentation engine: {describe} ({settings.SEGMENTATION_ENGINE_CHOICE.reason})"
    logger.info(line)
    return line
