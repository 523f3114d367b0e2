"""The colour model: what the weight-free engine knows of an object's colours and its
surroundings', and how strongly a pixel's colour says "object" or "background".

A model is a pair of Gaussian mixtures in GrabCut's layout (1 x 65: 5 components of a weight,
3 means and 9 covariances), one of the object and one of what surrounds it, fitted without
randomness (:func:`fit_mixture`), so the same input always gives the same mask. A pixel's
evidence is the ratio of the two mixtures' likelihoods, within ``COLOUR_LIMIT``; a colour alien
to the object counts as background at full strength.

Every step of the engine weighs colours this way: the click cut
(:mod:`~segmentation.engines.classic.click_cut`) learns mixtures near the clicks, the
propagation's cut (:mod:`~segmentation.engines.classic.cutout`) weighs the anchor's model
against the carried shape, and the colour models of stretches of the edge
(:mod:`~segmentation.engines.classic.local_colour`) fit their own pairs of mixtures. So the
mixtures, their fitting and the limit on what a colour may say live here, below all of them,
and the steps never import each other for them.

Works at the engine's working size, on RGB uint8 frames and boolean masks of that size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import cv2
import numpy as np

from segmentation.engines.classic.crop import crop_box
from segmentation.engines.classic.graphcut import mixture_log_likelihood

COMPONENTS = 5  # GrabCut's mixtures: 5 components x (1 weight + 3 means + 9 covariances)
COVARIANCE_FLOOR = 1.0  # added to the diagonal, so a flat colour still has a volume
COLOUR_LIMIT = 8.0  # the most a pixel's colour alone can say (log-likelihood ratio)
# A colour the object's mixture finds e^100 times less likely than the least likely of the
# object's own pixels is not the object's, whatever the background's mixture makes of it.
ALIEN_MARGIN = 100.0
BACKGROUND_SAMPLE = 5000  # background pixels kept from where a model was learned
MIXTURE_SAMPLE = 20000  # a mixture is fitted to at most this many pixels, evenly spaced


@dataclass(frozen=True)
class ColourModel:
    """Background and foreground Gaussian mixtures, each 1 x 65 in GrabCut's layout, the
    log-likelihood under the foreground's below which a colour is alien to the object, the
    object's area (pixels) where the models were learned, and a sample of the background's
    pixels there (N x 3), for :meth:`with_surroundings`."""

    background: np.ndarray
    foreground: np.ndarray
    alien: float = -np.inf
    area: int = 0
    background_sample: np.ndarray | None = None

    def with_surroundings(self, pixels: np.ndarray) -> ColourModel:
        """The model with its background relearned from its own sample and ``pixels`` (N x 3,
        what surrounds the object now), half and half; the object's colours stay as they are."""
        if self.background_sample is None or len(pixels) == 0:
            return self
        now = pixels[:: max(1, len(pixels) // BACKGROUND_SAMPLE)]
        background = fit_mixture(np.concatenate([self.background_sample, now]))
        return dataclasses.replace(self, background=background)

    def evidence(self, pixels: np.ndarray) -> np.ndarray:
        """How much each pixel's colour (N x 3) says "object" (positive) or "background", within
        ``COLOUR_LIMIT``. Between two mixtures that both explain a colour badly, the ratio means
        little: a colour alien to the object counts as background at full strength."""
        own = mixture_log_likelihood(pixels, self.foreground)
        ratio = np.clip(
            own - mixture_log_likelihood(pixels, self.background), -COLOUR_LIMIT, COLOUR_LIMIT
        )
        ratio[own < self.alien] = -COLOUR_LIMIT
        return ratio


class EvidenceMap:
    """A model's colour evidence (:meth:`ColourModel.evidence`) over one frame, worked out for
    a pixel only when first asked for: a frame's steps look at overlapping regions."""

    def __init__(self, image: np.ndarray, model: ColourModel) -> None:
        self.image, self.model = image, model
        self._values = np.full(image.shape[:2], np.nan, np.float32)

    def at(self, region: np.ndarray | tuple[slice, slice]) -> np.ndarray:
        """The evidence at ``region`` (a boolean mask, or a window as two slices)."""
        if isinstance(region, np.ndarray):  # the mask's own box, so that less is scanned
            if not region.any():
                return np.zeros(0, np.float32)
            top, bottom, left, right = crop_box(region, region.shape, margin=0.0, pad=0)
            window = np.s_[top:bottom, left:right]
            return self.at(window)[region[window]]
        values = self._values[region]  # a view: what is filled in here is kept
        missing = np.isnan(values)
        if missing.any():
            values[missing] = self.model.evidence(self.image[region][missing])
        return values


def colour_model(image: np.ndarray, mask: np.ndarray) -> ColourModel | None:
    """Colour models of the object in ``mask`` and of its surroundings (a crop around it)."""
    if not mask.any() or mask.all():
        return None
    top, bottom, left, right = crop_box(mask, mask.shape, margin=0.5)
    pixels, inside = image[top:bottom, left:right], mask[top:bottom, left:right]
    if inside.all():
        pixels, inside = image, mask
    foreground = fit_mixture(pixels[inside])
    own = mixture_log_likelihood(pixels[inside], foreground)
    outside = pixels[~inside]
    return ColourModel(
        fit_mixture(outside),
        foreground,
        alien=float(own.min()) - ALIEN_MARGIN,
        area=int(np.count_nonzero(mask)),
        # a copy: a view would keep every outside pixel alive with the anchor
        background_sample=outside[:: max(1, len(outside) // BACKGROUND_SAMPLE)].copy(),
    )


def fit_mixture(pixels: np.ndarray, *, limit: int = MIXTURE_SAMPLE) -> np.ndarray:
    """A Gaussian mixture of the pixels (N x 3) in GrabCut's layout, without randomness.

    GrabCut would seed its own mixtures by k-means++ from a random generator, and on a hard frame
    different seeds give very different masks. Here k-means starts from the pixels ranked along
    their main colour axis and cut into equal groups, so the same pixels give the same mixture.
    """
    data = np.ascontiguousarray(pixels[:: max(1, -(-len(pixels) // limit))], dtype=np.float32)
    count = min(COMPONENTS, len(data))
    centred = data - data.mean(axis=0)
    axis = np.linalg.svd(centred[:: max(1, len(centred) // 2000)], full_matrices=False)[2][0]
    labels = np.empty((len(data), 1), np.int32)
    labels[np.argsort(centred @ axis), 0] = np.arange(len(data)) * count // len(data)
    if len(data) > 1:  # OpenCV reads a single row as that many one-channel points
        criteria = (cv2.TERM_CRITERIA_MAX_ITER + cv2.TERM_CRITERIA_EPS, 10, 0.5)
        _, labels, _ = cv2.kmeans(data, count, labels, criteria, 1, cv2.KMEANS_USE_INITIAL_LABELS)
    weights = np.zeros(COMPONENTS)
    means = np.zeros((COMPONENTS, 3))
    covariances = np.zeros((COMPONENTS, 3, 3))
    for component in range(count):
        members = data[labels[:, 0] == component].astype(np.float64)
        if len(members) == 0:
            continue
        weights[component] = len(members) / len(data)
        means[component] = members.mean(axis=0)
        spread = np.cov(members, rowvar=False) if len(members) > 1 else np.zeros((3, 3))
        covariances[component] = spread + np.eye(3) * COVARIANCE_FLOOR
    return np.concatenate([weights, means.ravel(), covariances.ravel()])[None, :]
