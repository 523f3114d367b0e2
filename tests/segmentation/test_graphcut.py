from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from segmentation.engines.classic.cutout import COMPONENTS, COVARIANCE_FLOOR, fit_mixture
from segmentation.engines.classic.graphcut import cut, mixture_log_likelihood
from tests.conftest import ROOT

REGRESSIONS = ROOT.parent / "shared" / "data" / "regressions"


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


def test_fit_mixture_is_deterministic_and_finds_the_colours() -> None:
    random = np.random.default_rng(1)
    pixels = np.concatenate(
        [random.normal(c, 2.0, (500, 3)) for c in ([20, 20, 20], [200, 30, 30], [30, 200, 30])]
    )

    first, second = fit_mixture(pixels), fit_mixture(pixels[::-1].copy())

    assert first.shape == (1, 13 * COMPONENTS)
    weights = first[0, :COMPONENTS]
    assert math.isclose(weights.sum(), 1.0)
    means = first[0, COMPONENTS : 4 * COMPONENTS].reshape(COMPONENTS, 3)[weights > 0]
    for colour in ([20, 20, 20], [200, 30, 30], [30, 200, 30]):
        assert np.min(np.abs(means - colour).max(axis=1)) < 3.0
    assert np.array_equal(first, fit_mixture(pixels))
    assert np.array_equal(np.sort(first[0, :COMPONENTS]), np.sort(second[0, :COMPONENTS]))


@pytest.mark.skipif(not REGRESSIONS.is_dir(), reason="../shared/data/regressions is not present")
def test_fit_mixture_of_one_pixel() -> None:
    # the object region of one pixel that crashed OpenCV's k-means (issue 16): a single row of
    # data reads there as three one-channel points
    pixel = np.load(REGRESSIONS / "fit_mixture_kmeans.npy")

    mixture = fit_mixture(pixel)

    expected = np.zeros((1, 13 * COMPONENTS))
    expected[0, 0] = 1.0
    expected[0, COMPONENTS : COMPONENTS + 3] = [101.0, 96.0, 97.0]
    covariances = np.zeros((COMPONENTS, 3, 3))
    covariances[0] = np.eye(3) * COVARIANCE_FLOOR
    expected[0, 4 * COMPONENTS :] = covariances.ravel()
    assert np.array_equal(mixture, expected)


@settings(max_examples=200, deadline=None)
@given(
    arrays(
        np.uint8, st.tuples(st.integers(1, 40), st.just(3)), elements=st.sampled_from([0, 7, 255])
    )
)
def test_fit_mixture_of_few_and_flat_pixels(pixels: np.ndarray) -> None:
    mixture = fit_mixture(pixels)

    assert mixture.shape == (1, 13 * COMPONENTS)
    assert np.isfinite(mixture).all()
    assert math.isclose(mixture[0, :COMPONENTS].sum(), 1.0)
    assert np.isfinite(mixture_log_likelihood(pixels, mixture)).all()


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
