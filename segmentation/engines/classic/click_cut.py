"""Cutting one object out of one frame from clicks, the weight-free way.

Works on a frame at the engine's working size (RGB, uint8) and boolean masks of that size.
Clicks act one at a time, each on the mask the ones before it left:

- Every click cuts the frame afresh from all the clicks so far. Each pixel is weighed by its
  colour (Gaussian mixtures of the object, learned near the positive clicks, and of the rest,
  where the pixels a negative click marks weigh as a fixed share: they are the colours the
  person said are not the object, however few) and by where it lies: geodesically nearer the
  positive clicks than the negative ones and the frame's edge, on a cost that rises steeply
  across colour edges, is likelier object. A graph cut
  (:mod:`~segmentation.engines.classic.graphcut`) settles the two; a click's own pixels are fixed.
- After the first click, a click only changes the mask where it was put: a positive click adds
  the part of the new cut around it (within reach of the object's size), a negative click
  removes the part of the mask around it that the new cut gave up. So a click never undoes what
  the earlier ones got right, and every click visibly does what it asked.
- A click correcting a mask that the clicks did not make (propagated, or given) changes it only
  within ``NEAR`` times the click's distance to the mask's edge: the simulated user, like a
  person, clicks in the middle of an error, so that distance measures the error, and a mask
  that was mostly right is never thrown away by one click. The mask stands in as a positive
  click (:func:`prior_seed`).

A box (its corners in working-size pixels) works as GrabCut's rectangle: the pixels outside it
are certainly not the object, those inside it probably are, and the object's colours are first
learned from all of it. The box alone makes the first mask; clicks then correct it as above,
their cuts kept inside the box too (a click outside it changes nothing).

Geodesic distances are taken at half the working size: they only outline where the object may
be, and they are the costliest step of a click. :class:`Terrain` keeps what does not depend on
the clicks, so that further clicks on a frame are cheaper than its first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import cv2
import numpy as np
from skimage.graph import MCP_Geometric

from segmentation.engines.classic.colour_model import COLOUR_LIMIT, MIXTURE_SAMPLE, fit_mixture
from segmentation.engines.classic.crop import crop_box
from segmentation.engines.classic.graphcut import cut as graph_cut
from segmentation.engines.classic.graphcut import mixture_log_likelihood

EDGE_SEED_STEP = 2  # every 2nd pixel (at half size) of the frame's edge seeds the background
PLACE_WEIGHT = 4.0  # the weight of where a pixel lies relative to the clicks
CORE = 0.5  # the object's colours are learned where the positive clicks are 2x nearer
CROP_MARGIN = 0.5  # the cut sees the likely object grown by half its size on each side
REACH = 0.5  # a positive click adds at most this share of the object's size around itself
# A click changes the mask at most this many times its distance to the mask's edge away from
# itself: a correction fixes the error it was put in, not the mask (chosen from 1.5, 2, 3, 4, 6
# on corrections of propagated masks on the 19 dev sequences' worst frames).
NEAR = 2.0
# The first click correcting a mask that is there already stands on the mask's deepest point
# outside the quarter of it geodesically nearest a negative click (which denies that part).
DENIED_SHARE = 0.25
# The negative clicks' own pixels make up this share of what the background's colours are
# learned from (chosen from 0, 0.1, 0.2, 0.3 on the default video's ball and the dev set's
# clicks; 0 left the drawn shadow that one negative click marks in the ball's mask).
MARKED_SHARE = 0.2
# Rounds of learning colours and cutting for a box's own cut: GrabCut's colours, learned from the
# whole box at first, need a few rounds to shed the background inside it.
BOX_ITERATIONS = 4


@dataclass(frozen=True)
class Box:
    left: float  # working-size pixels, the corners' own (inclusive)
    top: float
    right: float
    bottom: float

    def inside(self, shape: tuple[int, int]) -> np.ndarray:
        """The pixels of a frame of ``shape`` within the box."""
        height, width = shape
        rows, columns = np.ogrid[:height, :width]
        return (
            (columns >= round(self.left))
            & (columns <= round(self.right))
            & (rows >= round(self.top))
            & (rows <= round(self.bottom))
        )


@dataclass(frozen=True)
class Click:
    x: float  # working-size pixels
    y: float
    positive: bool


@dataclass
class Terrain:
    """A frame as clicks see it: its colours, the walking cost and the distance to its edge."""

    image: np.ndarray
    cost: np.ndarray = field(init=False)  # half size
    to_edge: np.ndarray = field(init=False)  # half size, geodesic

    def __post_init__(self) -> None:
        height, width = self.image.shape[:2]
        self.cost = cv2.resize(
            edge_cost(self.image),
            (max(width // 2, 1), max(height // 2, 1)),
            interpolation=cv2.INTER_AREA,
        )
        rows, columns = self.cost.shape
        across, down = range(0, columns, EDGE_SEED_STEP), range(0, rows, EDGE_SEED_STEP)
        edge = [(0, x) for x in across] + [(rows - 1, x) for x in across]
        edge += [(y, 0) for y in down] + [(y, columns - 1) for y in down]
        self.to_edge = _geodesic(self.cost, edge)

    def distance(self, clicks: list[Click]) -> np.ndarray:
        """Geodesic distance from the clicks, at half size; inf everywhere without clicks."""
        rows, columns = self.cost.shape
        starts = [
            (min(max(round(c.y / 2), 0), rows - 1), min(max(round(c.x / 2), 0), columns - 1))
            for c in clicks
        ]
        return _geodesic(self.cost, starts) if starts else np.full(self.cost.shape, np.inf)


def cut_clicks(
    terrain: Terrain,
    clicks: list[Click],
    *,
    start: np.ndarray,
    done: int = 0,
    click_radius: int = 3,
    iterations: int = 1,
    correcting: bool = False,
    area: int = 0,
    box: Box | None = None,
    between: Callable[[], None] = lambda: None,
) -> np.ndarray:
    """Apply ``clicks[done:]`` one by one to the mask ``start`` (which holds ``clicks[:done]``),
    calling ``between()`` between the steps of each (:attr:`VideoState.between_steps`: its
    geodesic distances, its colour models, its graph cut, each tens of milliseconds).

    ``correcting``: ``start`` is a mask the clicks did not make (propagated or given), so each
    click changes it only within ``NEAR`` times its distance to the mask's edge; ``area`` is the
    object's size where known elsewhere (a positive click may add more to a smaller mask).
    ``box``: every cut stays in it (``start`` is then :func:`cut_box`'s, or holds it)."""
    mask = start
    for number in range(done, len(clicks)):
        between()
        fresh = _cut(terrain, clicks[: number + 1], mask, click_radius, iterations, box, between)
        if not mask.any():
            mask = fresh
        else:
            mask = _merge(mask, fresh, clicks[number], near=correcting, area=area)
    return mask


def cut_box(
    terrain: Terrain,
    box: Box,
    *,
    click_radius: int = 3,
    iterations: int = 1,
    between: Callable[[], None] = lambda: None,
) -> np.ndarray:
    """The object that ``box`` alone describes, GrabCut's way (``between()`` between steps)."""
    start = np.zeros(terrain.image.shape[:2], bool)
    rounds = max(iterations, BOX_ITERATIONS)
    return _cut(terrain, [], start, click_radius, rounds, box, between)


def prior_seed(terrain: Terrain, prior: np.ndarray, click: Click) -> Click:
    """The positive click that stands for ``prior`` (a mask that is there already) when
    ``click`` is the first to correct it: its deepest point, away from a negative click."""
    where = prior
    if not click.positive:
        height, width = prior.shape
        denied = cv2.resize(terrain.distance([click]), (width, height))
        far = prior & (denied > np.percentile(denied[prior], 100 * DENIED_SHARE))
        where = far if far.any() else prior
    depth = cv2.distanceTransform(where.view(np.uint8), cv2.DIST_L2, 5)
    y, x = np.unravel_index(int(np.argmax(depth)), depth.shape)
    return Click(float(x), float(y), True)


def edge_cost(image: np.ndarray) -> np.ndarray:
    """The cost of walking over each pixel: 1 in flat regions, rising steeply across edges."""
    lab = cv2.cvtColor(cv2.GaussianBlur(image, (3, 3), 0), cv2.COLOR_RGB2LAB).astype(np.float32)
    gradient = np.zeros(lab.shape[:2], np.float32)
    for channel in cv2.split(lab):
        gradient += cv2.Sobel(channel, cv2.CV_32F, 1, 0) ** 2
        gradient += cv2.Sobel(channel, cv2.CV_32F, 0, 1) ** 2
    gradient = np.sqrt(gradient)
    return 1.0 + 10.0 * gradient / (gradient.mean() + 1e-6)


def _cut(
    terrain: Terrain,
    clicks: list[Click],
    previous: np.ndarray,
    radius: int,
    iterations: int,
    box: Box | None = None,
    between: Callable[[], None] = lambda: None,
) -> np.ndarray:
    """The object as all of ``clicks`` (and ``box``) describe it, cut from the whole frame;
    ``between()`` between its steps."""
    positives = [c for c in clicks if c.positive]
    height, width = previous.shape
    boxed = box.inside((height, width)) if box is not None else np.ones((height, width), bool)
    if positives:
        near_in = terrain.distance(positives)
        near_out = np.minimum(
            terrain.distance([c for c in clicks if not c.positive]), terrain.to_edge
        )
        # from +1 (at a positive click) to -1 (at a negative click or the edge)
        place = cv2.resize(((near_out - near_in) / (near_out + near_in + 1e-6)), (width, height))
        core = cv2.resize((near_in < CORE * near_out).view(np.uint8), (width, height)) > 0
        likely, core = (place > 0) & boxed, core & boxed
    elif box is not None:
        # GrabCut's start: the whole box is probably the object, where it lies says no more
        place, likely, core = np.zeros((height, width), np.float32), boxed, boxed
    else:
        return np.zeros(previous.shape, bool)
    top, bottom, left, right = crop_box(likely | previous, likely.shape, margin=CROP_MARGIN)
    window = np.s_[top:bottom, left:right]
    image, place, likely, core = terrain.image[window], place[window], likely[window], core[window]
    hard_in, hard_out = np.zeros(likely.shape, np.uint8), np.zeros(likely.shape, np.uint8)
    for click in clicks:
        centre = (round(click.x) - left, round(click.y) - top)
        cv2.circle(hard_in if click.positive else hard_out, centre, radius, 1, thickness=-1)
    pixels = image.reshape(-1, 3)
    marked = pixels[hard_out.ravel().astype(bool)]
    # outside the box is certainly background, whatever a click there says: the box is the
    # region the cut may take, as GrabCut's rectangle is
    hard_in[~boxed[window]], hard_out[~boxed[window]] = 0, 1
    learn_from = core.astype(bool) if core.any() else likely
    mask = likely
    for _ in range(iterations):
        if mask.all() or not mask.any() or not learn_from.any():
            break
        between()
        foreground = fit_mixture(pixels[learn_from.ravel()])
        background = fit_mixture(_with_share(pixels[~mask.ravel()], marked, MARKED_SHARE))
        colour = mixture_log_likelihood(pixels, foreground) - mixture_log_likelihood(
            pixels, background
        )
        unary = np.clip(colour.reshape(place.shape), -COLOUR_LIMIT, COLOUR_LIMIT)
        unary += PLACE_WEIGHT * place
        between()
        mask = graph_cut(image, unary, hard_in=hard_in.astype(bool), hard_out=hard_out.astype(bool))
        learn_from = mask
    whole = np.zeros(previous.shape, bool)
    whole[window] = mask
    return _keep_clicked_parts(whole, positives)


def _with_share(pixels: np.ndarray, marked: np.ndarray, share: float) -> np.ndarray:
    """``pixels`` (N x 3) and ``marked`` repeated to make up ``share`` of the whole."""
    if len(marked) == 0 or len(pixels) == 0:
        return pixels
    pixels = pixels[:: max(1, -(-len(pixels) // MIXTURE_SAMPLE))]
    repeats = np.resize(marked, (round(share / (1 - share) * len(pixels)), marked.shape[1]))
    return np.concatenate([pixels, repeats])


def _merge(
    previous: np.ndarray, fresh: np.ndarray, click: Click, *, near: bool, area: int
) -> np.ndarray:
    """``previous`` changed only around ``click``: by the part of ``fresh`` it adds (positive)
    or by the part of ``previous`` that ``fresh`` gives up (negative) that holds the click;
    with ``near``, within ``NEAR`` times the click's distance to the edge of ``previous``."""
    height, width = previous.shape
    x, y = min(max(round(click.x), 0), width - 1), min(max(round(click.y), 0), height - 1)
    change = fresh & ~previous if click.positive else previous & ~fresh
    _, labels = cv2.connectedComponents(change.view(np.uint8), connectivity=8)
    if labels[y, x] == 0:
        return previous
    part = labels == labels[y, x]
    reach = np.inf
    if near:
        # the click's distance to the mask's edge (the frame's counts for a negative one): at
        # least how deep it is in the error it corrects
        if click.positive:
            to_edge = cv2.distanceTransform((~previous).view(np.uint8), cv2.DIST_L2, 5)[y, x]
        else:
            to_edge = cv2.distanceTransform(np.pad(previous, 1).view(np.uint8), cv2.DIST_L2, 5)
            to_edge = to_edge[y + 1, x + 1]
        reach = NEAR * max(float(to_edge), 1.0)
    if click.positive:  # a weak edge must not let one click flood the frame
        reach = min(reach, REACH * np.sqrt(max(np.count_nonzero(previous), area)))
    if np.isfinite(reach):
        rows, columns = np.ogrid[:height, :width]
        part &= (columns - click.x) ** 2 + (rows - click.y) ** 2 <= reach**2
    return previous | part if click.positive else previous & ~part


def _geodesic(cost: np.ndarray, starts: list[tuple[int, int]]) -> np.ndarray:
    distances, _ = MCP_Geometric(cost).find_costs(starts)
    # scikit-image may answer in Fortran order, which OpenCV refuses
    return np.ascontiguousarray(distances, np.float32)


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
