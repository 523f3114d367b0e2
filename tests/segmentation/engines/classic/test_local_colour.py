"""Colour models of stretches of an object's edge: where their windows go, and their veto."""

from __future__ import annotations

import numpy as np

from segmentation.engines.classic.colour_model import EvidenceMap, colour_model
from segmentation.engines.classic.local_colour import EdgeModels


def square_frame() -> tuple[np.ndarray, np.ndarray]:
    """A green floor and a square, red above and blue below; right of the red half, a blue
    patch of floor. The object is half blue, so blue is the object's colour to the whole."""
    random = np.random.default_rng(5)
    image = np.clip(random.normal([60, 160, 60], 6, (60, 60, 3)), 0, 255).astype(np.uint8)
    square = np.zeros((60, 60), bool)
    square[15:45, 15:45] = True
    red = np.clip(random.normal([200, 40, 40], 6, (15, 30, 3)), 0, 255)
    blue = np.clip(random.normal([40, 60, 200], 6, (15, 30, 3)), 0, 255)
    image[15:30, 15:45], image[30:45, 15:45] = red.astype(np.uint8), blue.astype(np.uint8)
    patch = np.clip(random.normal([40, 60, 200], 6, (15, 7, 3)), 0, 255)
    image[15:30, 45:52] = patch.astype(np.uint8)
    return image, square


def on_outline(points: np.ndarray, top: int, left: int, size: int) -> bool:
    xs, ys = points[:, 0], points[:, 1]
    across = (xs >= left) & (xs <= left + size - 1) & (ys >= top) & (ys <= top + size - 1)
    edge = np.isin(xs, [left, left + size - 1]) | np.isin(ys, [top, top + size - 1])
    return bool((across & edge).all())


def test_windows_are_laid_along_the_edge() -> None:
    image, square = square_frame()

    edges = EdgeModels.learn(image, square, band=2)

    # the outline has 116 pixels; a window every 6, each 13 x 13, half object and half not
    assert edges.radius == 6
    assert len(edges.centres) == 20
    assert on_outline(edges.centres, 15, 15, 30)
    assert edges.foregrounds.shape == edges.backgrounds.shape == (20, 65)


def test_a_window_needs_both_sides_to_learn() -> None:
    image, _ = square_frame()
    speck = np.zeros((60, 60), bool)
    speck[30:33, 30:33] = True  # 9 pixels of object: too few anywhere

    edges = EdgeModels.learn(image, speck, band=2)

    assert len(edges.centres) == 0
    assert edges.centres.shape == (0, 2)


def test_windows_ride_the_flow_onto_the_new_edge() -> None:
    image, square = square_frame()
    edges = EdgeModels.learn(image, square, band=2)
    # everything moved 5 right and 3 down: each new pixel comes from 5 left and 3 up
    grid = np.indices((60, 60), np.float32)
    where_from = np.stack([grid[1] - 5, grid[0] - 3], axis=-1)
    moved_square = np.roll(square, (3, 5), axis=(0, 1))

    moved = edges.moved(where_from, moved_square)

    assert np.array_equal(moved.centres, edges.centres + np.float32([5, 3]))
    assert moved.foregrounds is edges.foregrounds


def test_windows_snap_to_the_nearest_edge_when_the_flow_is_off() -> None:
    image, square = square_frame()
    edges = EdgeModels.learn(image, square, band=2)
    no_motion = np.stack(np.indices((60, 60), np.float32)[::-1], axis=-1)
    grown = np.zeros_like(square)
    grown[13:47, 13:47] = True  # the predicted mask is 2 pixels larger on every side

    moved = edges.moved(no_motion, grown)

    assert on_outline(moved.centres, 13, 13, 34)
    assert np.abs(moved.centres - edges.centres).max() == 2


def test_the_edge_vetoes_a_colour_that_is_the_objects_only_elsewhere() -> None:
    image, square = square_frame()
    model = colour_model(image, square)
    edges = EdgeModels.learn(image, square, band=2)
    box = (0, 60, 0, 60)
    colour = EvidenceMap(image, model).at(np.s_[0:60, 0:60]).copy()
    free = np.zeros_like(square)
    free[10:50, 10:55] = True
    free[20:40, 20:40] = False  # deep inside: the cut is not free there

    vetoed = edges.veto(image, box, colour, free)

    patch = np.s_[16:24, 46:51]  # its upper part: the windows of the blue half say otherwise
    assert (colour[patch] > 0).all()  # the whole says "object" on the blue patch of floor
    assert (vetoed[patch] < 0).all()  # the stretch of edge beside it knows better
    assert (vetoed <= colour).all()  # a veto only ever lowers
    assert np.array_equal(vetoed[~free], colour[~free])
    assert np.array_equal(vetoed[16:29, 16:29], colour[16:29, 16:29])  # the red is the red
