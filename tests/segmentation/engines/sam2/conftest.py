"""The devices the ``sam2`` engine's tests run on: the CPU always, and CUDA where this machine
has a GPU (CI has none; a lent GPU machine runs the same tests on both)."""

from __future__ import annotations

import pytest
import torch

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
# the device a server with no SAM2_DEVICE answers on, as the engine names it
AUTO_DEVICE = "cuda:0" if torch.cuda.is_available() else "cpu"


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    return torch.device(request.param)
