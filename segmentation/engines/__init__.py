"""Segmentation engines, chosen by name: ``classic`` (weight-free, the default) and ``sam2``
(SAM 2 / 2.1 from the official checkpoints).

Engines are imported only when chosen, so the default never loads what another engine needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from segmentation.engines.base import Engine, EngineConfigError, EngineOptions

ENGINES = {
    "classic": "segmentation.engines.classic.ClassicEngine",
    "sam2": "segmentation.engines.sam2.engine.Sam2Engine",
}


def engine_class(name: str) -> type[Engine]:
    path = ENGINES.get(name)
    if path is None:
        raise EngineConfigError(f"unknown engine {name!r} (engines: {', '.join(sorted(ENGINES))})")
    module, _, attribute = path.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def engine_options(name: str, raw: Mapping[str, str]) -> EngineOptions:
    """The engine's options parsed from strings; :class:`EngineConfigError` names a bad one."""
    return engine_class(name).Options.parse(raw)


def engine_create(name: str, raw: Mapping[str, str]) -> Engine:
    cls = engine_class(name)
    return cls(cls.Options.parse(raw))
