"""Reading and writing SAM 2 checkpoints.

The official files (``sam2.1_hiera_tiny.pt`` ... ``sam2_hiera_large.pt``) are a dict whose
``"model"`` entry is the state dict; they load unchanged. Files this project writes add a
``"config"`` entry (the :class:`ModelConfig` as a dict), so models of sizes that are not
official (the small ones the tests use) load too. Any file that does not fit is refused with
:class:`CheckpointError`, naming the file and the first keys that are wrong.
"""

from __future__ import annotations

import pickle
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from segmentation.engines.sam2.config import ModelConfig, size_config, size_infer
from segmentation.engines.sam2.model import Sam2Model

SHOWN_KEYS = 5


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the model."""


def checkpoint_load(path: Path, *, model_size: str = "") -> Sam2Model:
    """The model in ``path``, on the CPU, in eval mode, its norms folded for inference.
    ``model_size`` (an official name such as ``sam2.1_hiera_small``, ``tiny`` ... ``large``, or
    ``edgetam``) overrides what the file says."""
    path = Path(path)
    content = _read(path)
    state = content.get("model", content) if isinstance(content, Mapping) else None
    if not isinstance(state, Mapping) or not all(
        isinstance(v, torch.Tensor) for v in state.values()
    ):
        raise CheckpointError(f"{path.name}: not a SAM 2 checkpoint (no state dict of tensors)")
    config = _config(path, content, state, model_size)
    model = Sam2Model(config)
    _check_fit(path, model.state_dict(), state)
    model.load_state_dict(state)
    model.eval().fold_norms()
    return model


def checkpoint_save(model: Sam2Model, path: Path) -> None:
    """Write ``model`` in the official layout, with its config."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    torch.save({"model": model.state_dict(), "config": model.config.as_dict()}, partial)
    partial.replace(path)


def _read(path: Path) -> Any:
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError, zipfile.BadZipFile) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CheckpointError(
            f"{path.name}: cannot be read as a PyTorch checkpoint (truncated or not one?): {reason}"
        ) from None


def _config(
    path: Path, content: Mapping[str, Any], state: Mapping[str, torch.Tensor], model_size: str
) -> ModelConfig:
    if model_size:
        try:
            return size_config(model_size)
        except KeyError:
            raise CheckpointError(f"unknown SAM 2 model size {model_size!r}") from None
    embedded = content.get("config")
    if isinstance(embedded, Mapping):
        try:
            return ModelConfig.from_dict(embedded)
        except (TypeError, KeyError, ValueError) as error:
            message = f"{path.name}: its model config is unreadable ({error})"
            raise CheckpointError(message) from None
    name = size_infer(state)
    if name is None:
        raise CheckpointError(
            f"{path.name}: its weights match no SAM 2 model size nor EdgeTAM; "
            "name one with SAM2_MODEL_SIZE"
        )
    return size_config(name)


def _check_fit(
    path: Path, expected: Mapping[str, torch.Tensor], found: Mapping[str, torch.Tensor]
) -> None:
    problems = []
    missing = [key for key in expected if key not in found]
    if missing:
        problems.append(f"missing keys: {_first(missing)}")
    unexpected = [key for key in found if key not in expected]
    if unexpected:
        problems.append(f"unexpected keys: {_first(unexpected)}")
    wrong = [
        f"{key} {tuple(found[key].shape)} instead of {tuple(tensor.shape)}"
        for key, tensor in expected.items()
        if key in found and found[key].shape != tensor.shape
    ]
    if wrong:
        problems.append(f"mismatched shapes: {_first(wrong)}")
    if problems:
        raise CheckpointError(f"{path.name} does not fit the model: {'; '.join(problems)}")


def _first(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN_KEYS])
    more = len(items) - SHOWN_KEYS
    return shown + (f" and {more} more" if more > 0 else "")
