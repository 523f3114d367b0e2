"""Moving masks between frames (segmentation/engines/classic/flow.py): a textured disc that slides
over a still textured floor."""

from __future__ import annotations

import cv2
import numpy as np

from segmentation.engines.classic.flow import FlowWarp, object_motion, warp, warp_rigid
from segmentation.evaluation.metrics import region_similarity

HEIGHT, WIDTH = 180, 240
SHIFT = (6, -4)  # the disc's move between the frames, in pixels (x, y)


def frames() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Old and new grey frames and the disc's mask on each."""
    random = np.random.default_rng(3)
    floor = cv2.GaussianBlur(random.uniform(0, 255, (HEIGHT, WIDTH)).astype(np.uint8), (5, 5), 0)
    skin = cv2.GaussianBlur(random.uniform(0, 255, (HEIGHT, WIDTH)).astype(np.uint8), (3, 3), 0)
    masks, pictures = [], []
    for dx, dy in ((0, 0), SHIFT):
        mask = np.zeros((HEIGHT, WIDTH), np.uint8)
        cv2.circle(mask, (110 + dx, 95 + dy), 40, 1, -1)
        moved = cv2.warpAffine(skin, np.float32([[1, 0, dx], [0, 1, dy]]), (WIDTH, HEIGHT))
        pictures.append(np.where(mask.astype(bool), moved, floor))
        masks.append(mask.astype(bool))
    return pictures[0], pictures[1], masks[0], masks[1]


def test_the_object_motion_is_the_disc_s_move() -> None:
    old, new, _, new_mask = frames()
    where_from = FlowWarp("medium").backward_map(old, new)

    motion = object_motion(new_mask, where_from)

    # new frame to old: no turn and no scaling, and the move undone to within a quarter pixel
    assert np.allclose(motion[:, :2], np.eye(2), atol=0.005)
    assert np.allclose(motion[:, 2], [-SHIFT[0], -SHIFT[1]], atol=0.25)


def test_the_mask_moved_by_the_object_motion_lands_on_the_disc() -> None:
    old, new, old_mask, new_mask = frames()
    where_from = FlowWarp("medium").backward_map(old, new)
    by_flow = warp(old_mask.astype(np.float32), where_from) > 0.5

    moved = warp_rigid(old_mask.astype(np.float32), object_motion(by_flow, where_from)) > 0.5

    assert region_similarity(moved, new_mask) >= 0.99  # 1.0 here; the fit is not exact to a pixel


def test_a_region_too_small_has_no_motion() -> None:
    old, new, _, _ = frames()
    where_from = FlowWarp("medium").backward_map(old, new)
    region = np.zeros((HEIGHT, WIDTH), bool)
    region[95, 110:115] = True

    assert object_motion(region, where_from) is None


def test_a_window_s_flow_is_that_window_s_and_the_rest_stays_put() -> None:
    old, new, _, new_mask = frames()
    window = (40, 150, 50, 170)  # around the disc, which the window holds whole
    top, bottom, left, right = window

    where_from = FlowWarp("medium").backward_map(old, new, window)

    alone = FlowWarp("medium").backward_map(
        old[top:bottom, left:right], new[top:bottom, left:right]
    )
    # the same flow; only the order of the float additions differs
    assert np.allclose(
        where_from[top:bottom, left:right], alone + np.float32([left, top]), rtol=0, atol=1e-4
    )
    ys, xs = np.mgrid[:HEIGHT, :WIDTH].astype(np.float32)
    outside = np.ones((HEIGHT, WIDTH), bool)
    outside[top:bottom, left:right] = False
    assert np.array_equal(where_from[outside], np.dstack([xs, ys])[outside])
    motion = object_motion(new_mask, where_from)
    assert np.allclose(motion[:, 2], [-SHIFT[0], -SHIFT[1]], atol=0.25)
