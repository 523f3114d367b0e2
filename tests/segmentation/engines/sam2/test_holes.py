"""Small holes found on the device (each device this machine has) agree with OpenCV's
connected components, which finds them on the host."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from segmentation.engines.sam2.holes import (
    MAX_AREA,
    holes_filled,
    small_holes,
    small_holes_on_host,
)


def holes_by_opencv(background: np.ndarray, max_area: int) -> np.ndarray:
    _, labels, stats, _ = cv2.connectedComponentsWithStats(
        background.astype(np.uint8), connectivity=8
    )
    small = np.flatnonzero(stats[:, cv2.CC_STAT_AREA] <= max_area)
    return np.isin(labels, small[small > 0]) & background


def on(device: torch.device, background: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(background).to(device)


def test_a_diagonal_of_max_area_pixels_is_one_hole_and_one_more_is_not(device) -> None:
    background = np.zeros((1, 1, 20, 20), bool)
    for k in range(8):  # 8 pixels, 7 steps corner to corner
        background[0, 0, 2 + k, 2 + k] = True
    for k in range(9):
        background[0, 0, 2 + k, 12] = True

    holes = small_holes(on(device, background), 8).cpu().numpy()[0, 0]

    assert holes.sum() == 8
    assert holes[2:10, 2:10].diagonal().all()
    assert not holes[:, 12].any()


def test_a_large_component_is_never_a_hole_though_split_into_small_labels(device) -> None:
    # a 1-pixel-wide ring of 76 pixels: after 7 steps its labels are still many small runs
    background = np.zeros((1, 1, 24, 24), bool)
    background[0, 0, 2, 2:22] = background[0, 0, 21, 2:22] = True
    background[0, 0, 2:22, 2] = background[0, 0, 2:22, 21] = True

    holes = small_holes(on(device, background), 8)

    assert not holes.any()


@pytest.mark.parametrize("max_area", [1, 8, 20])
def test_random_masks_agree_with_opencv(max_area: int, device) -> None:
    rng = np.random.default_rng(7)
    for density in (0.2, 0.45, 0.6, 0.8):
        background = rng.random((3, 1, 48, 64)) < density

        holes = small_holes(on(device, background), max_area).cpu().numpy()

        for index in range(3):
            expected = holes_by_opencv(background[index, 0], max_area)
            assert np.array_equal(holes[index, 0], expected), (density, index)


@pytest.mark.parametrize("max_area", [1, 8, 20])
def test_on_the_host_the_same_holes_are_found(max_area: int) -> None:
    rng = np.random.default_rng(11)
    for density in (0.2, 0.5, 0.8):
        background = torch.from_numpy(rng.random((4, 1, 40, 56)) < density)

        on_host = small_holes_on_host(background, max_area)

        assert on_host.dtype == torch.bool
        assert torch.equal(on_host, small_holes(background, max_area)), density


def test_holes_filled_sets_only_the_holes(device) -> None:
    logits = torch.full((1, 1, 8, 8), 5.0, device=device)
    logits[0, 0, 3, 3] = -2.0  # a one-pixel hole
    logits[0, 0, :, 6:] = -4.0  # a background strip of 16 pixels

    filled = holes_filled(logits, 8, 0.1)

    expected = logits.clone()
    expected[0, 0, 3, 3] = 0.1
    assert torch.equal(filled, expected)
    assert holes_filled(logits, 0, 0.1) is logits


@pytest.mark.parametrize("find", [small_holes, small_holes_on_host])
def test_max_area_is_bounded(find) -> None:
    with pytest.raises(ValueError, match=f"max_area must be within 1..{MAX_AREA}, got 65"):
        find(torch.zeros(1, 1, 4, 4, dtype=torch.bool), 65)
