"""The propagation's cut: a mask carried from the previous frame, re-cut around its edge.

Works on a frame already scaled to the engine's working size (RGB, uint8) and on boolean masks
of that size. :func:`cut_in_band` trusts the carried mask deep inside and far outside, and
re-cuts a band around its edge with a graph cut (:mod:`~segmentation.engines.classic.graphcut`)
that adds a prior for the carried shape to the colours
(:mod:`~segmentation.engines.classic.colour_model`). The cut runs in a crop around the band, as
its cost grows with the pixels it sees.

Clicks are cut in :mod:`~segmentation.engines.classic.click_cut`.
"""

from __future__ import annotations

import cv2
import numpy as np

from segmentation.engines.classic.colour_model import COLOUR_LIMIT, ColourModel, EvidenceMap
from segmentation.engines.classic.crop import crop_box
from segmentation.engines.classic.graphcut import cut as graph_cut
from segmentation.engines.classic.local_colour import EdgeModels


def cut_in_band(
    image: np.ndarray,
    carried: np.ndarray,
    model: ColourModel | EvidenceMap,
    *,
    band: int,
    sure: np.ndarray | None = None,
    prior_weight: float = 4.0,
    edges: EdgeModels | None = None,
) -> np.ndarray:
    """Re-cut ``carried`` within ``band`` pixels of its edge, with ``model``'s colours and a prior
    that favours the carried shape, the more so the deeper a pixel lies on either side. Pixels
    deeper than ``band`` inside ``sure`` (default: ``carried``) stay in. ``model`` may come as an
    :class:`EvidenceMap` of it on ``image``, to reuse what was already worked out there.
    ``edges``, colour models of stretches of the object's edge, may veto the global colours
    where the cut is free (:mod:`~segmentation.engines.classic.local_colour`)."""
    if not carried.any():
        return carried
    kernel = disk(band)
    inside = cv2.erode((carried if sure is None else sure).view(np.uint8), kernel).astype(bool)
    near = cv2.dilate(carried.view(np.uint8), kernel).astype(bool)
    top, bottom, left, right = crop_box(near, carried.shape, margin=0.0, pad=2)
    crop = carried[top:bottom, left:right].view(np.uint8)
    pixels = image[top:bottom, left:right]
    depth_in = cv2.distanceTransform(crop, cv2.DIST_L2, 3)
    depth_out = cv2.distanceTransform(1 - crop, cv2.DIST_L2, 3)
    signed = np.clip((depth_in - depth_out) / band, -1.0, 1.0)
    # however sure the colours, the carried shape keeps a say
    evidence = model if isinstance(model, EvidenceMap) else EvidenceMap(image, model)
    colour = evidence.at(np.s_[top:bottom, left:right])
    # and however sure the shape, a colour that is clearly not the object's is not forced in
    # (something passing in front moves the flow, and with it the carried shape)
    sure_in = inside[top:bottom, left:right] & (colour > -COLOUR_LIMIT)
    if edges is not None:
        free = near[top:bottom, left:right] & ~inside[top:bottom, left:right]
        colour = edges.veto(image, (top, bottom, left, right), colour, free)
    mask = np.zeros(carried.shape, bool)
    mask[top:bottom, left:right] = graph_cut(
        pixels,
        colour + prior_weight * signed,
        hard_in=sure_in,
        hard_out=~near[top:bottom, left:right],
    )
    return mask


def disk(radius: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
