"""The process's segmentation engine: chosen from the settings (``SEGMENTATION_ENGINE``, or with
``auto`` from the models folder), and built once, on first use."""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path

from django.conf import settings

from segmentation.engines import engine_class, engine_create
from segmentation.engines.base import Engine
from segmentation.engines.choice import EngineChoice, cuda_available, engine_choose

logger = logging.getLogger(__name__)

AUTO = "auto"


def engine_chosen() -> EngineChoice:
    """The engine this process's sessions use, and why: ``SEGMENTATION_ENGINE`` when it names
    one; with ``auto`` (unset), a learned checkpoint in the models folder that fits this machine,
    else classic (chosen once per folder)."""
    if settings.SEGMENTATION_ENGINE != AUTO:
        return EngineChoice(settings.SEGMENTATION_ENGINE, "", "SEGMENTATION_ENGINE is set")
    return _engine_choose(settings.SAM2_MODELS_DIR)


@cache
def _engine_choose(models_dir: Path) -> EngineChoice:
    return engine_choose(models_dir, gpu=cuda_available)


def engine_chosen_options() -> dict[str, str]:
    """The chosen engine's options: ``SEGMENTATION_ENGINE_OPTIONS``; for sam2, after the models
    folder, the checkpoint chosen and the ``SAM2_*`` variables."""
    choice = engine_chosen()
    if choice.engine != "sam2":
        return dict(settings.SEGMENTATION_ENGINE_OPTIONS)
    checkpoint = {"checkpoint": choice.checkpoint} if choice.checkpoint else {}
    return {
        "models_dir": str(settings.SAM2_MODELS_DIR),
        **checkpoint,
        **settings.SAM2_ENGINE_OPTIONS,
        **settings.SEGMENTATION_ENGINE_OPTIONS,
    }


@cache
def engine_get() -> Engine:
    return engine_create(engine_chosen().engine, engine_chosen_options())


def engine_given_masks_run_model() -> bool:
    """Whether the sessions' engine runs its model on a mask given as a prompt
    (:attr:`Engine.given_masks_run_model`). The engine's class answers, so a web process whose
    sessions live in inference workers, which holds no engine, answers as they would."""
    return engine_class(engine_chosen().engine).given_masks_run_model


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
        describe = f"{engine_chosen().engine} in {describe}"
    line = f"segmentation engine: {describe} ({engine_chosen().reason})"
    logger.info(line)
    return line


def engine_start() -> None:
    """The server's start-up work for the engine (registered with the edge by ``apps.py``):
    load it, then say which answers and why."""
    # Load the engine now: a bad checkpoint stops the server at start, and no click waits for it.
    # With inference workers, they hold the engine and this process none.
    if not settings.SEGMENTATION_WORKERS:
        engine_get()
    engine_announce()


def engine_health() -> dict[str, str]:
    """What ``/healthz`` reports of the engine (registered with the edge at start-up)."""
    return {
        "engine": engine_chosen().engine,
        # what answers and why: "EdgeTAM on cpu (bfloat16)", "edgetam.pt in var/models"
        "engine_model": engine_describe(),
        "engine_chosen_because": engine_chosen().reason,
    }
