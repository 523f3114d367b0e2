"""The box a step of the weight-free engine works in.

A graph cut, a colour model's evidence and the optical flow all cost in proportion to the pixels
they see, so each runs in a crop around the region it may change or learn from rather than on
the whole frame. The click cut, the propagation's cut, the colour models and the engine's flow
all crop the same way, so the box is worked out here, below all of them.
"""

from __future__ import annotations

import numpy as np


def crop_box(
    region: np.ndarray, shape: tuple[int, int], *, margin: float, pad: int = 8
) -> tuple[int, int, int, int]:
    """``(top, bottom, left, right)`` around ``region``, grown by ``margin`` of its size."""
    rows, columns = np.flatnonzero(region.any(axis=1)), np.flatnonzero(region.any(axis=0))
    height, width = shape
    if len(rows) == 0:
        return 0, height, 0, width
    grow_y = int((rows[-1] - rows[0]) * margin) + pad
    grow_x = int((columns[-1] - columns[0]) * margin) + pad
    return (
        max(rows[0] - grow_y, 0),
        min(rows[-1] + 1 + grow_y, height),
        max(columns[0] - grow_x, 0),
        min(columns[-1] + 1 + grow_x, width),
    )
