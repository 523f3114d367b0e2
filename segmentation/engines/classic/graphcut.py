"""A binary graph cut with colour models and a shape prior (PyMaxflow).

The energy of a labelling sums, per pixel, how badly its colour fits the label's Gaussian
mixture and how far it strays from a prior (a mask carried along the optical flow), plus, per
pair of neighbours, a cost for a label change that is high in flat colour and low across edges.
GrabCut's own cut has no prior term, so a mask carried from frame to frame wears away wherever
object and background share colours; the prior makes the cut keep the shape it was given unless
the colours clearly say otherwise.
"""

from __future__ import annotations

import maxflow
import numpy as np

SMOOTHNESS = 50.0  # GrabCut's weight for a label change between neighbours in flat colour
_RIGHT = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 0]])
_DOWN = np.array([[0, 0, 0], [0, 0, 0], [0, 1, 0]])


def mixture_log_likelihood(pixels: np.ndarray, mixture: np.ndarray) -> np.ndarray:
    """log p(colour) of every pixel (N x 3) under a mixture in GrabCut's layout (1 x 65)."""
    flat = mixture.ravel()
    count = len(flat) // 13
    weights = flat[:count]
    means = flat[count : 4 * count].reshape(count, 3)
    covariances = flat[4 * count :].reshape(count, 3, 3)
    used = weights > 0
    # (x - m)' C^-1 (x - m) = |L'x - L'm|^2 with C^-1 = L L': every component in one product
    whiten = np.linalg.cholesky(np.linalg.inv(covariances[used]))  # k x 3 x 3
    offsets = np.einsum("ki,kij->kj", means[used], whiten).ravel()
    constants = np.log(weights[used]) - 0.5 * (
        np.linalg.slogdet(covariances[used])[1] + 3 * np.log(2 * np.pi)
    )
    # components x pixels, so that every sum and maximum below runs along contiguous rows
    colours = pixels.reshape(-1, 3).T.astype(np.float64)
    projected = whiten.transpose(0, 2, 1).reshape(-1, 3) @ colours
    projected -= offsets[:, None]
    np.square(projected, out=projected)
    terms = projected[0::3] + projected[1::3] + projected[2::3]
    terms *= -0.5
    terms += constants[:, None]
    best = terms.max(axis=0)
    terms -= best
    np.exp(terms, out=terms)
    return best + np.log(terms.sum(axis=0))


def cut(
    image: np.ndarray,
    unary: np.ndarray,
    *,
    hard_in: np.ndarray | None = None,
    hard_out: np.ndarray | None = None,
    smoothness: float = SMOOTHNESS,
) -> np.ndarray:
    """The labelling (True: object) that minimizes the energy. ``unary`` is, per pixel, the cost
    of "background" minus the cost of "object": positive where the object is more likely."""
    colours = image.astype(np.float32)
    right = np.zeros(unary.shape, np.float32)
    down = np.zeros(unary.shape, np.float32)
    right[:, :-1] = ((colours[:, 1:] - colours[:, :-1]) ** 2).sum(axis=-1)
    down[:-1] = ((colours[1:] - colours[:-1]) ** 2).sum(axis=-1)
    pairs = right.size - right.shape[0] + down.size - down.shape[1]
    beta = 1.0 / (2.0 * (right.sum() + down.sum()) / max(pairs, 1) + 1e-9)
    graph = maxflow.Graph[float]()
    nodes = graph.add_grid_nodes(unary.shape)
    graph.add_grid_edges(
        nodes, weights=smoothness * np.exp(-beta * right), structure=_RIGHT, symmetric=True
    )
    graph.add_grid_edges(
        nodes, weights=smoothness * np.exp(-beta * down), structure=_DOWN, symmetric=True
    )
    source = np.maximum(unary, 0).astype(np.float64)
    sink = np.maximum(-unary, 0).astype(np.float64)
    certain = 1e9
    if hard_in is not None:
        source[hard_in] = certain
    if hard_out is not None:
        sink[hard_out] = certain
    graph.add_grid_tedges(nodes, source, sink)
    graph.maxflow()
    return ~graph.get_grid_segments(nodes)
