"""The DAVIS measures of a mask against the ground truth.

- J, region similarity: the intersection over union of the two masks.
- F, boundary measure: the F-score of boundary precision and recall, where a boundary pixel
  counts as matched when the other mask's boundary lies within a tolerance of it. DAVIS sets that
  tolerance at 0.8% of the image diagonal (8 pixels at 854 x 480).

Both are 1.0 when mask and truth are both empty, and 0.0 when exactly one of them is.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

BOUNDARY_TOLERANCE = 0.008


def region_similarity(mask: np.ndarray, truth: np.ndarray) -> float:
    union = np.count_nonzero(mask | truth)
    if union == 0:
        return 1.0
    return np.count_nonzero(mask & truth) / union


def boundary_measure(
    mask: np.ndarray, truth: np.ndarray, *, tolerance: float = BOUNDARY_TOLERANCE
) -> float:
    mask_edge, truth_edge = boundary(mask), boundary(truth)
    mask_count, truth_count = np.count_nonzero(mask_edge), np.count_nonzero(truth_edge)
    if mask_count == 0 and truth_count == 0:
        return 1.0
    if mask_count == 0 or truth_count == 0:
        return 0.0
    radius = math.ceil(tolerance * math.hypot(*mask.shape))
    disk = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    near_truth = cv2.dilate(truth_edge.view(np.uint8), disk).astype(bool)
    near_mask = cv2.dilate(mask_edge.view(np.uint8), disk).astype(bool)
    precision = np.count_nonzero(mask_edge & near_truth) / mask_count
    recall = np.count_nonzero(truth_edge & near_mask) / truth_count
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def boundary(mask: np.ndarray) -> np.ndarray:
    """The mask's pixels with one of their 8 neighbours outside it (not the image's edge)."""
    mask = np.ascontiguousarray(mask, dtype=bool)
    inner = cv2.erode(mask.view(np.uint8), None, borderType=cv2.BORDER_REPLICATE)
    return mask & ~inner.astype(bool)
