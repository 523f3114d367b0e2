"""Carrying masks from one frame to the next along dense optical flow (OpenCV's DIS).

The flow is computed backward, from the new frame to the old one, so every pixel of the new frame
looks up where it came from: the warped mask has no holes where the motion spreads out.
"""

from __future__ import annotations

import cv2
import numpy as np

# DIS refuses pictures smaller than its patches; smaller frames are padded (edge pixels repeated)
MIN_SIDE = 16

PRESETS = {
    "ultrafast": cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST,
    "fast": cv2.DISOPTICAL_FLOW_PRESET_FAST,
    "medium": cv2.DISOPTICAL_FLOW_PRESET_MEDIUM,
}


class FlowWarp:
    """One DIS instance (not thread-safe: one per video state) and a reusable pixel grid."""

    def __init__(self, preset: str = "fast") -> None:
        self._dis = cv2.DISOpticalFlow_create(PRESETS[preset])
        self._grid: tuple[np.ndarray, np.ndarray] | None = None

    def backward_map(self, old_grey: np.ndarray, new_grey: np.ndarray) -> np.ndarray:
        """For each pixel of the new frame, where it was in the old frame (H x W x 2, float32)."""
        height, width = new_grey.shape
        if height < MIN_SIDE or width < MIN_SIDE:
            pad = (0, max(0, MIN_SIDE - height), 0, max(0, MIN_SIDE - width))
            old_grey = cv2.copyMakeBorder(old_grey, *pad, cv2.BORDER_REPLICATE)
            new_grey = cv2.copyMakeBorder(new_grey, *pad, cv2.BORDER_REPLICATE)
        flow = np.ascontiguousarray(self._dis.calc(new_grey, old_grey, None)[:height, :width])
        if self._grid is None or self._grid[0].shape != (height, width):
            xs, ys = np.meshgrid(
                np.arange(width, dtype=np.float32), np.arange(height, dtype=np.float32)
            )
            self._grid = (xs, ys)
        flow[..., 0] += self._grid[0]
        flow[..., 1] += self._grid[1]
        return flow


def warp(values: np.ndarray, where_from: np.ndarray) -> np.ndarray:
    """``values`` (float32, old frame) resampled at ``where_from`` (a :meth:`backward_map`)."""
    return cv2.remap(
        values, where_from, None, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0
    )
