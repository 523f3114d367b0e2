"""The simulated user of the evaluation: where the next click goes, given a mask and the truth.

- The first click is positive, at the object's interior point farthest from its boundary.
- Every further click goes to the largest error region (8-connected): positive inside a region
  the mask missed, negative inside one it wrongly covers (a missed region wins a tie in size),
  at that region's interior point farthest from the region's boundary.

Distances are Euclidean and the image edge counts as boundary; ties between points go to the
first in row-major order. Points are returned in pixels, ``(x, y)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class Click:
    x: int
    y: int
    positive: bool


def first_click(truth: np.ndarray) -> Click:
    if not truth.any():
        raise ValueError("the object is not on this frame")
    y, x = deepest_point(truth)
    return Click(x, y, True)


def next_click(mask: np.ndarray, truth: np.ndarray) -> Click | None:
    """The correcting click, or None when the mask equals the truth."""
    missed, extra = largest_region(truth & ~mask), largest_region(mask & ~truth)
    if missed.sum() == 0 and extra.sum() == 0:
        return None
    positive = bool(np.count_nonzero(missed) >= np.count_nonzero(extra))
    y, x = deepest_point(missed if positive else extra)
    return Click(x, y, positive)


def largest_region(mask: np.ndarray) -> np.ndarray:
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask.view(np.uint8), connectivity=8)
    if count <= 1:
        return np.zeros_like(mask)
    areas = stats[1:, cv2.CC_STAT_AREA]
    return labels == 1 + int(np.argmax(areas))


def deepest_point(region: np.ndarray) -> tuple[int, int]:
    """``(row, column)`` of the region's point farthest from its boundary."""
    padded = np.pad(region.view(np.uint8), 1)
    distance = cv2.distanceTransform(padded, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
    row, column = np.unravel_index(int(np.argmax(distance)), distance.shape)
    return int(row), int(column)
