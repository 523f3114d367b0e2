"""Colour models of short stretches of an object's edge, after Video SnapCut (Bai et al. 2009).

One pair of mixtures for the whole object and its surroundings must tell every object colour
from every background colour, and where the two share colours it says little. Along a short
stretch of the edge only the colours on either side of that stretch matter, and they often
differ where the global ones overlap. So windows are laid along the object's edge on the frame
a pass starts from, each learning its own pair of mixtures; they ride along the flow with the
object, staying on its edge.

A window learned on one frame can sit on another part of the object a few frames later (a leg
swings, the object turns), and its mixtures then speak about colours they never saw. So the
local models only ever veto: a pixel's evidence is the global one or the local one, whichever
says "object" less. On the 19 development sequences, a research version whose windows could
also say "object" took tennis from 0.79 to 0.63 first-mask J&F (and the mean from 0.698 to
0.694): windows that had learned the player's skin against other colours took the clay court
between his legs.

Works at the engine's working size, like :mod:`~segmentation.engines.classic.cutout`.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from segmentation.engines.classic.colour_model import COLOUR_LIMIT, fit_mixture
from segmentation.engines.classic.graphcut import mixture_log_likelihood

RADIUS = 3  # a window's half-size, in bands: it sees the band on both sides and beyond
MIN_SIDE = 20  # pixels of the object and of the rest a window needs to learn from
# Where windows thin out, the global evidence takes over smoothly: it counts as a window this
# heavy (a window's weight is 1 at its centre, falling off as a Gaussian).
GLOBAL_WEIGHT = 0.1


@dataclass(frozen=True)
class EdgeModels:
    """Windows of half-size ``radius`` centred on ``centres`` (N x 2, ``(x, y)``), each with its
    object and background mixtures (N x 65 each, GrabCut's layout)."""

    radius: int
    centres: np.ndarray
    foregrounds: np.ndarray
    backgrounds: np.ndarray

    @classmethod
    def learn(cls, image: np.ndarray, mask: np.ndarray, band: int) -> EdgeModels:
        """Windows every ``RADIUS * band`` pixels along the edges of ``mask`` on ``image``."""
        radius = RADIUS * band
        contours, _ = cv2.findContours(mask.view(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_NONE)
        centres, foregrounds, backgrounds = [], [], []
        for contour in contours:
            for x, y in contour[::radius, 0, :]:
                window = _window(x, y, radius, mask.shape)
                pixels, inside = image[window].reshape(-1, 3), mask[window].ravel()
                if min(np.count_nonzero(inside), np.count_nonzero(~inside)) < MIN_SIDE:
                    continue
                centres.append((x, y))
                foregrounds.append(fit_mixture(pixels[inside])[0])
                backgrounds.append(fit_mixture(pixels[~inside])[0])
        if not centres:
            return cls(radius, np.zeros((0, 2), np.float32), np.zeros((0, 65)), np.zeros((0, 65)))
        return cls(
            radius, np.array(centres, np.float32), np.array(foregrounds), np.array(backgrounds)
        )

    def moved(self, where_from: np.ndarray, onto: np.ndarray) -> EdgeModels:
        """The windows carried along the flow (``where_from``, a backward map of the new frame)
        and then to the nearest edge pixel of ``onto``, the object's mask there as predicted."""
        edge = onto & ~cv2.erode(onto.view(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
        if not edge.any() or not len(self.centres):
            return self
        height, width = onto.shape
        columns, rows = _clamped(self.centres, width, height)
        # forward motion, read from the backward map at the old place: smooth flow is all it needs
        ahead = 2 * self.centres - where_from[rows, columns]
        columns, rows = _clamped(ahead, width, height)
        # SciPy is imported here, where the option that needs it is on: at the module's top it
        # took 0.3 s of every start of the project (a manage.py command checks the engine's
        # options, and so imports the engine), which is off by default (issue 48).
        from scipy import ndimage

        _, (nearest_rows, nearest_columns) = ndimage.distance_transform_edt(
            ~edge, return_indices=True
        )
        centres = np.stack([nearest_columns[rows, columns], nearest_rows[rows, columns]], axis=1)
        return EdgeModels(
            self.radius, centres.astype(np.float32), self.foregrounds, self.backgrounds
        )

    def veto(
        self,
        image: np.ndarray,
        box: tuple[int, int, int, int],
        colour: np.ndarray,
        where: np.ndarray,
    ) -> np.ndarray:
        """``colour``, the global evidence over ``box`` of ``image`` (top, bottom, left, right),
        lowered at the pixels ``where`` (a mask over the box) to what the windows there say."""
        top, bottom, left, right = box
        total = np.zeros(colour.shape, np.float32)
        weight = np.zeros(colour.shape, np.float32)
        spread = 2 * (self.radius / 1.5) ** 2
        for (x, y), foreground, background in zip(
            self.centres, self.foregrounds, self.backgrounds, strict=True
        ):
            rows, columns = _window(round(x), round(y), self.radius, image.shape[:2])
            rows = slice(max(rows.start, top) - top, min(rows.stop, bottom) - top)
            columns = slice(max(columns.start, left) - left, min(columns.stop, right) - left)
            chosen = where[rows, columns]
            if not chosen.any():
                continue
            ys, xs = np.nonzero(chosen)
            ys, xs = ys + rows.start, xs + columns.start
            pixels = image[ys + top, xs + left]
            ratio = mixture_log_likelihood(pixels, foreground) - mixture_log_likelihood(
                pixels, background
            )
            near = np.exp(-((ys + top - y) ** 2 + (xs + left - x) ** 2) / spread)
            total[ys, xs] += near * np.clip(ratio, -COLOUR_LIMIT, COLOUR_LIMIT)
            weight[ys, xs] += near
        local = (total + GLOBAL_WEIGHT * colour) / (weight + GLOBAL_WEIGHT)
        return np.where(where, np.minimum(local, colour), colour)


def _window(x: int, y: int, radius: int, shape: tuple[int, int]) -> tuple[slice, slice]:
    height, width = shape
    return (
        slice(max(y - radius, 0), min(y + radius + 1, height)),
        slice(max(x - radius, 0), min(x + radius + 1, width)),
    )


def _clamped(points: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer ``(columns, rows)`` of ``points`` (N x 2, ``(x, y)``), within the frame."""
    columns = np.clip(np.rint(points[:, 0]), 0, width - 1).astype(np.intp)
    rows = np.clip(np.rint(points[:, 1]), 0, height - 1).astype(np.intp)
    return columns, rows
