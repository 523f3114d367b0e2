"""What a video state holds: the bytes of the arrays and tensors it keeps, for checking that its
memory stays flat however long the video (tests and benchmarks).

The walk follows the state's attributes through dictionaries, sequences and the engines' own
objects, and counts each NumPy array's and tensor's storage once. It leaves out what the state
shares or bounds elsewhere: the frame source (a bounded cache of its own), the engine and the
model's weights.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
from torch import nn

from segmentation.engines.base import Engine
from segmentation.engines.frames import FrameSource

_PACKAGE = "segmentation.engines"


def held_bytes(state: object) -> int:
    """The bytes of every array and tensor ``state`` holds, each storage counted once."""
    seen: set[int] = set()  # objects walked and arrays counted, by id
    storages: set[int] = set()  # tensors' storages counted, by address
    total = 0
    stack: list[Any] = [state]
    while stack:
        item = stack.pop()
        if isinstance(item, np.ndarray):
            owner = item.base if isinstance(item.base, np.ndarray) else item
            if id(owner) not in seen:
                seen.add(id(owner))
                total += owner.nbytes
        elif isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            key = storage.data_ptr() or id(storage)
            if key not in storages:
                storages.add(key)
                total += storage.nbytes()
        elif id(item) in seen or isinstance(item, FrameSource | Engine | nn.Module):
            continue
        elif isinstance(item, dict):
            seen.add(id(item))
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            seen.add(id(item))
            stack.extend(item)
        elif type(item).__module__.startswith(_PACKAGE):
            seen.add(id(item))
            if dataclasses.is_dataclass(item):
                stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
            stack.extend(getattr(item, "__dict__", {}).values())
    return total
