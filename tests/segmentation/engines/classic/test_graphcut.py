from __future__ import annotations

import math

import numpy as np

from segmentation.engines.classic.colour_model import COMPONENTS
from segmentation.engines.classic.graphcut import cut, mixture_log_likelihood


def one_gaussian(mean: list[float], variance: float) -> np.ndarray:
    weights = [1.0] + [0.0] * (COMPONENTS - 1)
    means = mean + [0.0] * 3 * (COMPONENTS - 1)
    covariances = list(np.eye(3).ravel() * variance) + list(np.eye(3).ravel()) * (COMPONENTS - 1)
    return np.array([weights + means + covariances])


def test_log_likelihood_of_one_gaussian() -> None:
    mixture = one_gaussian([10.0, 20.0, 30.0], 4.0)
    pixels = np.array([[10.0, 20.0, 30.0], [12.0, 20.0, 30.0]])

    result = mixture_log_likelihood(pixels, mixture)

    constant = -0.5 * (3 * math.log(4.0) + 3 * math.log(2 * math.pi))
    assert np.allclose(result, [constant, constant - 0.5 * (4.0 / 4.0)], rtol=0, atol=1e-12)


def test_cut_follows_the_unary_and_smooths_noise() -> None:
    # given an image whose left half is dark and right half bright, and a unary that says
    # "object" on the left, with two single pixels saying the opposite
    image = np.zeros((20, 40, 3), np.uint8)
    image[:, 20:] = 200
    unary = np.where(np.arange(40) < 20, 1.0, -1.0)[None, :].repeat(20, axis=0)
    unary[5, 5] = -1.0
    unary[10, 30] = 1.0

    mask = cut(image, unary)

    expected = np.zeros((20, 40), bool)
    expected[:, :20] = True
    assert np.array_equal(mask, expected)


def test_cut_keeps_hard_labels() -> None:
    image = np.full((10, 10, 3), 100, np.uint8)
    unary = np.full((10, 10), -5.0)
    hard_in = np.zeros((10, 10), bool)
    hard_in[4:6, 4:6] = True

    mask = cut(image, unary, hard_in=hard_in)

    assert np.array_equal(mask, hard_in)
