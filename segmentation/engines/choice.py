"""Which engine answers when ``SEGMENTATION_ENGINE`` is not set: a learned checkpoint in the models
folder if one fits the machine, else ``classic``.

- On a GPU, a SAM 2 file wins: SAM 2.1 before SAM 2.0, the largest size first (a file that
  large was fetched on purpose, and a GPU runs any of them at interactive speed).
- Otherwise EdgeTAM's file, made for CPUs (it runs on a GPU too).
- Otherwise ``classic``, which needs no weights: a fresh machine starts with it.

Files are told by their official names (what ``manage.py sam2_weights fetch`` writes); nothing is
loaded here, and the GPU is asked about only when a SAM 2 file is there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from segmentation.engines.sam2.catalogue import OFFICIAL, OfficialCheckpoint

# largest first, SAM 2.1 before SAM 2.0
_SAM2_PREFERENCE = ("large", "base_plus", "small", "tiny")


@dataclass(frozen=True)
class EngineChoice:
    engine: str
    checkpoint: str  # what SAM2_CHECKPOINT defaults to ("" with classic)
    reason: str


def engine_choose(models_dir: Path, *, gpu: Callable[[], bool]) -> EngineChoice:
    """The engine for a process whose models folder is ``models_dir``; ``gpu()`` says whether
    CUDA can be used."""
    present = [c for c in OFFICIAL if (models_dir / c.file_name).is_file()]
    sam2 = sorted(
        (c for c in present if c.size != "edgetam"),
        key=lambda c: (c.version != "2.1", _SAM2_PREFERENCE.index(c.size)),
    )
    edgetam = next((c for c in present if c.size == "edgetam"), None)
    if sam2 and gpu():
        return _learned(sam2[0], f"a GPU, and {sam2[0].file_name} in {models_dir}")
    if edgetam is not None:
        why = f"{edgetam.file_name} in {models_dir}"
        if sam2:
            why += f" (and {sam2[0].file_name}, left for a GPU)"
        return _learned(edgetam, why)
    if sam2:
        return EngineChoice(
            "classic",
            "",
            f"{sam2[0].file_name} is in {models_dir}, but there is no GPU to run SAM 2 at"
            " interactive speed; fetch EdgeTAM for a CPU (manage.py sam2_weights fetch edgetam)",
        )
    return EngineChoice("classic", "", f"no learned checkpoint in {models_dir}")


def cuda_available() -> bool:
    """Whether PyTorch can use a CUDA device (PyTorch is imported only to ask)."""
    import torch

    return torch.cuda.is_available()


def _learned(checkpoint: OfficialCheckpoint, reason: str) -> EngineChoice:
    return EngineChoice("sam2", checkpoint.setting, reason)
