"""Carrying masks from one frame to the next along dense optical flow (OpenCV's DIS).

The flow is computed backward, from the new frame to the old one, so every pixel of the new frame
looks up where it came from: the warped mask has no holes where the motion spreads out.
"""

from __future__ import annotations

import cv2
import numpy as np

# DIS refuses pictures smaller than its patches; smaller frames are padded (edge pixels repeated)
MIN_SIDE = 16
MOTION_SAMPLES = 400  # flow vectors an object's motion is fitted to
MOTION_MIN_PIXELS = 6

PRESETS = {
    "ultrafast": cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST,
    "fast": cv2.DISOPTICAL_FLOW_PRESET_FAST,
    "medium": cv2.DISOPTICAL_FLOW_PRESET_MEDIUM,
}


class FlowWarp:
    """One DIS instance (not thread-safe: one per video state) and a reusable pixel grid."""

    def __init__(self, preset: str = "fast") -> None:
        self._dis = cv2.DISOpticalFlow_create(PRESETS[preset])
        self._grid: np.ndarray | None = None

    def backward_map(
        self,
        old_grey: np.ndarray,
        new_grey: np.ndarray,
        window: tuple[int, int, int, int] | None = None,
    ) -> np.ndarray:
        """For each pixel of the new frame, where it was in the old frame (H x W x 2, float32).
        With ``window`` (top, bottom, left, right), the flow is worked out there alone and every
        pixel outside it stays where it was."""
        where_from = self._identity(new_grey.shape).copy()
        inside = (
            np.s_[:, :] if window is None else np.s_[window[0] : window[1], window[2] : window[3]]
        )
        where_from[inside] += self._flow(old_grey[inside], new_grey[inside])
        return where_from

    def _flow(self, old_grey: np.ndarray, new_grey: np.ndarray) -> np.ndarray:
        """The backward flow, new frame to old (H x W x 2, float32)."""
        height, width = new_grey.shape
        if height < MIN_SIDE or width < MIN_SIDE:
            pad = (0, max(0, MIN_SIDE - height), 0, max(0, MIN_SIDE - width))
            old_grey = cv2.copyMakeBorder(old_grey, *pad, cv2.BORDER_REPLICATE)
            new_grey = cv2.copyMakeBorder(new_grey, *pad, cv2.BORDER_REPLICATE)
        # DIS reads only contiguous pictures, which a window of a frame is not
        old_grey, new_grey = np.ascontiguousarray(old_grey), np.ascontiguousarray(new_grey)
        return self._dis.calc(new_grey, old_grey, None)[:height, :width]

    def _identity(self, shape: tuple[int, int]) -> np.ndarray:
        """Every pixel's own position (H x W x 2, float32), kept for the last size asked."""
        if self._grid is None or self._grid.shape[:2] != shape:
            height, width = shape
            xs, ys = np.meshgrid(
                np.arange(width, dtype=np.float32), np.arange(height, dtype=np.float32)
            )
            self._grid = np.dstack([xs, ys])
        return self._grid


def warp(values: np.ndarray, where_from: np.ndarray) -> np.ndarray:
    """``values`` (float32, old frame) resampled at ``where_from`` (a :meth:`backward_map`)."""
    return cv2.remap(
        values, where_from, None, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0
    )


def object_motion(region: np.ndarray, where_from: np.ndarray) -> np.ndarray | None:
    """The motion of the object in ``region`` (a mask on the new frame) as one similarity
    transform (2 x 3, new frame to old), fitted robustly to the flow of its pixels; None when
    the region is too small to tell. Parts that the flow loses (fast limbs, pixels crossing an
    occluder) still move with the object as a whole."""
    rows, columns = np.nonzero(region)
    if len(rows) < MOTION_MIN_PIXELS:
        return None
    step = max(1, len(rows) // MOTION_SAMPLES)  # evenly spread, so the same input fits the same
    rows, columns = rows[::step], columns[::step]
    here = np.stack([columns, rows], axis=1).astype(np.float32)
    motion, _ = cv2.estimateAffinePartial2D(
        here, where_from[rows, columns], method=cv2.RANSAC, ransacReprojThreshold=2.0
    )
    return motion


def warp_rigid(values: np.ndarray, motion: np.ndarray) -> np.ndarray:
    """``values`` (float32, old frame) moved by ``motion`` (an :func:`object_motion`)."""
    height, width = values.shape
    return cv2.warpAffine(
        values,
        motion,
        (width, height),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )
