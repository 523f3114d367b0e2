"""Cutting one object out of one frame with graph cuts, the weight-free way.

Everything here works on a frame already scaled to the engine's working size (RGB, uint8) and
on boolean masks of that size. Clicks act one at a time, each on the mask left by the ones before
(OpenCV's GrabCut does the cutting):

- The first positive click on an empty mask guesses the object as the pixels geodesically nearer
  to it than to the frame's edge and the negative clicks, on a cost that rises steeply across
  colour edges; GrabCut then learns colour models from that guess and cuts.
- Every later click corrects locally. A positive click claims the pixels geodesically nearer to
  it than to the edge and the negative clicks (within reach of the object's size); a negative
  click gives up the object's pixels nearer to it than to the positive clicks. GrabCut re-cuts
  only a zone around that region: the rest of the mask stays as it was, so a click never undoes
  what earlier clicks got right.
- Propagation (:func:`cut_in_band`) trusts a mask carried from the previous frame deep inside and
  far outside, and re-cuts a band around its edge with a graph cut of our own
  (:mod:`~segmentation.engines.graphcut`) that adds a prior for the carried shape to the colours.

Colour models are Gaussian mixtures in GrabCut's layout, fitted without randomness
(:func:`fit_mixture`), so the same clicks always give the same mask. Cuts run in a crop around
the region they may change, as their cost grows with the pixels they see.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from skimage.graph import MCP_Geometric

from segmentation.engines.graphcut import cut as graph_cut
from segmentation.engines.graphcut import mixture_log_likelihood

COMPONENTS = 5  # GrabCut's mixtures: 5 components x (1 weight + 3 means + 9 covariances)
COVARIANCE_FLOOR = 1.0  # added to the diagonal, so a flat colour still has a volume
EDGE_SEED_STEP = 2  # every 2nd pixel (at half size) of the frame's edge seeds the background


@dataclass(frozen=True)
class ColourModel:
    """Background and foreground Gaussian mixtures, each 1 x 65 in GrabCut's layout."""

    background: np.ndarray
    foreground: np.ndarray


@dataclass(frozen=True)
class Click:
    x: float  # working-size pixels
    y: float
    positive: bool


def cut_clicks(
    image: np.ndarray,
    clicks: list[Click],
    *,
    start: np.ndarray,
    done: int = 0,
    click_radius: int = 3,
    iterations: int = 3,
) -> np.ndarray:
    """Apply ``clicks[done:]`` one by one to the mask ``start`` (which holds ``clicks[:done]``)."""
    mask = start
    cost = None
    for number in range(done, len(clicks)):
        click, before = clicks[number], clicks[: number + 1]
        if cost is None:
            cost = edge_cost(image)
        if not mask.any():
            if click.positive:
                mask = _cut_first(image, cost, before, click_radius, iterations)
        else:
            mask = _cut_correction(image, cost, mask, before, click_radius, iterations)
    return mask


def cut_in_band(
    image: np.ndarray,
    carried: np.ndarray,
    model: ColourModel,
    *,
    band: int,
    prior_weight: float = 4.0,
) -> np.ndarray:
    """Re-cut ``carried`` within ``band`` pixels of its edge, with ``model``'s colours and a prior
    that favours the carried shape, the more so the deeper a pixel lies on either side."""
    if not carried.any():
        return carried
    kernel = _disk(band)
    inside = cv2.erode(carried.view(np.uint8), kernel).astype(bool)
    near = cv2.dilate(carried.view(np.uint8), kernel).astype(bool)
    top, bottom, left, right = _crop_box(near, carried.shape, margin=0.0, pad=2)
    crop = carried[top:bottom, left:right].view(np.uint8)
    pixels = image[top:bottom, left:right]
    depth_in = cv2.distanceTransform(crop, cv2.DIST_L2, 3)
    depth_out = cv2.distanceTransform(1 - crop, cv2.DIST_L2, 3)
    signed = np.clip((depth_in - depth_out) / band, -1.0, 1.0)
    colour = mixture_log_likelihood(pixels, model.foreground) - mixture_log_likelihood(
        pixels, model.background
    )
    unary = colour.reshape(signed.shape) + prior_weight * signed
    mask = np.zeros(carried.shape, bool)
    mask[top:bottom, left:right] = graph_cut(
        pixels,
        unary,
        hard_in=inside[top:bottom, left:right],
        hard_out=~near[top:bottom, left:right],
    )
    return mask


def colour_model(image: np.ndarray, mask: np.ndarray) -> ColourModel | None:
    """Colour models of the object in ``mask`` and of its surroundings (a crop around it)."""
    if not mask.any() or mask.all():
        return None
    top, bottom, left, right = _crop_box(mask, mask.shape, margin=0.5)
    pixels, inside = image[top:bottom, left:right], mask[top:bottom, left:right]
    if inside.all():
        pixels, inside = image, mask
    return ColourModel(fit_mixture(pixels[~inside]), fit_mixture(pixels[inside]))


def fit_mixture(pixels: np.ndarray, *, limit: int = 20000) -> np.ndarray:
    """A Gaussian mixture of the pixels (N x 3) in GrabCut's layout, without randomness.

    GrabCut would seed its own mixtures by k-means++ from a random generator, and on a hard frame
    different seeds give very different masks. Here k-means starts from the pixels ranked along
    their main colour axis and cut into equal groups, so the same pixels give the same mixture.
    """
    data = np.ascontiguousarray(pixels[:: max(1, -(-len(pixels) // limit))], dtype=np.float32)
    count = min(COMPONENTS, len(data))
    centred = data - data.mean(axis=0)
    axis = np.linalg.svd(centred[:: max(1, len(centred) // 2000)], full_matrices=False)[2][0]
    ranks = np.argsort(np.argsort(centred @ axis))
    labels = (ranks * count // len(data)).astype(np.int32)[:, None]
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


def edge_cost(image: np.ndarray) -> np.ndarray:
    """The cost of walking over each pixel: 1 in flat regions, rising steeply across edges."""
    lab = cv2.cvtColor(cv2.GaussianBlur(image, (3, 3), 0), cv2.COLOR_RGB2LAB).astype(np.float32)
    gradient = np.zeros(lab.shape[:2], np.float32)
    for channel in cv2.split(lab):
        gradient += cv2.Sobel(channel, cv2.CV_32F, 1, 0) ** 2
        gradient += cv2.Sobel(channel, cv2.CV_32F, 0, 1) ** 2
    gradient = np.sqrt(gradient)
    return 1.0 + 10.0 * gradient / (gradient.mean() + 1e-6)


def _cut_first(
    image: np.ndarray, cost: np.ndarray, clicks: list[Click], radius: int, iterations: int
) -> np.ndarray:
    new = clicks[-1]
    negatives = [c for c in clicks if not c.positive]
    to_click, to_background = _distance(cost, [new]), _distance(cost, negatives, edge=True)
    guess = to_click < to_background
    labels = np.where(guess, cv2.GC_PR_FGD, cv2.GC_PR_BGD).astype(np.uint8)
    _stamp(labels, clicks, radius)
    # The first click says nothing about the background: show GrabCut plenty of it.
    box = _crop_box(guess, guess.shape, margin=1.0)
    mask = _grabcut(image, labels, box, iterations=iterations)
    return _keep_clicked_parts(mask, [c for c in clicks if c.positive])


def _cut_correction(
    image: np.ndarray,
    cost: np.ndarray,
    mask: np.ndarray,
    clicks: list[Click],
    radius: int,
    iterations: int,
) -> np.ndarray:
    new = clicks[-1]
    height, width = mask.shape
    to_click = _distance(cost, [new])
    if new.positive:
        negatives = [c for c in clicks if not c.positive]
        region = (to_click < _distance(cost, negatives, edge=True)) & ~mask
        # A weak edge must not let one click flood the frame: stay within the object's reach.
        reach = max(np.sqrt(np.count_nonzero(mask)), 0.05 * max(height, width))
        ys, xs = np.ogrid[:height, :width]
        region &= (xs - new.x) ** 2 + (ys - new.y) ** 2 <= reach**2
        guess = mask | region
    else:
        positives = [c for c in clicks if c.positive]
        region = mask & (to_click < _distance(cost, positives)) if positives else mask
        guess = mask & ~region
    zone = cv2.dilate(region.view(np.uint8), _disk(max(2, round(0.03 * max(height, width)))))
    zone = zone.astype(bool)
    labels = np.where(mask, cv2.GC_FGD, cv2.GC_BGD).astype(np.uint8)
    labels[zone] = np.where(guess[zone], cv2.GC_PR_FGD, cv2.GC_PR_BGD)
    _stamp(labels, clicks, radius)
    box = _crop_box(zone | mask, mask.shape, margin=0.25)
    result = _grabcut(image, labels, box, iterations=iterations)
    return _keep_clicked_parts(result, [c for c in clicks if c.positive])


def _distance(cost: np.ndarray, clicks: list[Click], *, edge: bool = False) -> np.ndarray:
    """Geodesic distance from the clicks (and the frame's edge), inf when there is no seed.

    Computed at half the working size and scaled back: the regions it outlines are only a
    first guess that the cut then settles, and it is the costliest step of a click."""
    height, width = cost.shape
    small = cv2.resize(
        cost, (max(width // 2, 1), max(height // 2, 1)), interpolation=cv2.INTER_AREA
    )
    rows, columns = small.shape
    starts = [
        (min(max(round(c.y / 2), 0), rows - 1), min(max(round(c.x / 2), 0), columns - 1))
        for c in clicks
    ]
    if edge:
        across, down = range(0, columns, EDGE_SEED_STEP), range(0, rows, EDGE_SEED_STEP)
        starts += [(0, x) for x in across] + [(rows - 1, x) for x in across]
        starts += [(y, 0) for y in down] + [(y, columns - 1) for y in down]
    if not starts:
        return np.full(cost.shape, np.inf)
    distances, _ = MCP_Geometric(small).find_costs(starts)
    # scikit-image may answer in Fortran order, which OpenCV refuses.
    return cv2.resize(np.ascontiguousarray(distances, np.float32), (width, height))


def _keep_clicked_parts(mask: np.ndarray, positives: list[Click]) -> np.ndarray:
    """Only the connected parts of ``mask`` that hold a positive click."""
    count, labels = cv2.connectedComponents(mask.view(np.uint8), connectivity=8)
    if count <= 2 or not positives:
        return mask
    height, width = mask.shape
    clicked = {
        labels[min(max(round(c.y), 0), height - 1), min(max(round(c.x), 0), width - 1)]
        for c in positives
    } - {0}
    return np.isin(labels, list(clicked)) if clicked else mask


def _stamp(labels: np.ndarray, clicks: list[Click], radius: int) -> None:
    for click in clicks:
        value = cv2.GC_FGD if click.positive else cv2.GC_BGD
        cv2.circle(labels, (round(click.x), round(click.y)), radius, int(value), thickness=-1)


def _disk(radius: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))


def _crop_box(
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


def _grabcut(
    image: np.ndarray, labels: np.ndarray, box: tuple[int, int, int, int], *, iterations: int
) -> np.ndarray:
    """OpenCV's GrabCut in ``box``: colour models fitted to ``labels``, then ``iterations``
    rounds of cutting and refitting. Hard labels (``GC_FGD``, ``GC_BGD``) never change."""
    top, bottom, left, right = box
    crop = np.ascontiguousarray(labels[top:bottom, left:right])
    pixels = np.ascontiguousarray(image[top:bottom, left:right])
    mask = np.zeros(labels.shape, bool)
    is_foreground = (crop == cv2.GC_FGD) | (crop == cv2.GC_PR_FGD)
    if is_foreground.all() or not is_foreground.any():
        mask[top:bottom, left:right] = is_foreground
        return mask
    background = fit_mixture(pixels[~is_foreground])
    foreground = fit_mixture(pixels[is_foreground])
    # GC_EVAL starts from the given mixtures; GC_INIT_WITH_MASK would seed them at random.
    cv2.grabCut(pixels, crop, None, background, foreground, iterations, cv2.GC_EVAL)
    mask[top:bottom, left:right] = (crop == cv2.GC_FGD) | (crop == cv2.GC_PR_FGD)
    return mask
