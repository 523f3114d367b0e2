"""Colour models (segmentation/engines/classic/colour_model.py): fitting a mixture without
randomness, learning an object's model, and the evidence it gives."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from segmentation.engines.classic.colour_model import (
    COLOUR_LIMIT,
    COMPONENTS,
    COVARIANCE_FLOOR,
    EvidenceMap,
    colour_model,
    fit_mixture,
)
from segmentation.engines.classic.graphcut import mixture_log_likelihood
from tests.conftest import ROOT

REGRESSIONS = ROOT.parent / "shared" / "data" / "regressions"


def two_colour_frame() -> tuple[np.ndarray, np.ndarray]:
    """A red square on a green floor, with a little noise so that both mixtures have a spread."""
    random = np.random.default_rng(3)
    image = np.clip(random.normal([60, 160, 60], 6, (40, 40, 3)), 0, 255).astype(np.uint8)
    square = np.zeros((40, 40), bool)
    square[10:30, 10:30] = True
    image[square] = np.clip(random.normal([200, 40, 40], 6, (400, 3)), 0, 255).astype(np.uint8)
    return image, square


def test_evidence_map_gives_the_models_evidence_wherever_asked() -> None:
    image, square = two_colour_frame()
    model = colour_model(image, square)
    evidence = EvidenceMap(image, model)
    window = np.s_[5:25, 0:40]
    ring = np.zeros_like(square)
    ring[0:40:3, 0:40:3] = True

    in_window, in_ring = evidence.at(window), evidence.at(ring)

    whole = model.evidence(image.reshape(-1, 3)).reshape(40, 40).astype(np.float32)
    assert np.array_equal(in_window, whole[window])
    assert np.array_equal(in_ring, whole[ring])
    assert in_window[10:20, 15:25].min() == COLOUR_LIMIT  # the square, at full strength
    assert in_window[0:5, 0:10].max() == -COLOUR_LIMIT  # the floor


def test_evidence_map_works_a_pixel_out_once() -> None:
    image, square = two_colour_frame()
    evidence = EvidenceMap(image, colour_model(image, square))
    before = evidence.at(np.s_[0:20, 0:20]).copy()

    image[:] = 0  # black, alien to the square: only pixels not yet asked for see it

    assert np.array_equal(evidence.at(np.s_[0:20, 0:20]), before)
    on_square = evidence.at(square).reshape(20, 20)
    assert np.array_equal(on_square[:10, :10], np.full((10, 10), COLOUR_LIMIT, np.float32))
    assert np.array_equal(on_square[10:], np.full((10, 20), -COLOUR_LIMIT, np.float32))


def test_a_model_relearns_its_background_from_new_surroundings() -> None:
    image, square = two_colour_frame()
    model = colour_model(image, square)
    blue = np.tile(np.array([[40, 60, 200]], np.uint8), (3000, 1))
    red_blue = np.array([[200, 40, 40], [40, 60, 200]], np.uint8)

    moved = model.with_surroundings(blue)

    assert len(model.background_sample) == 1200  # the floor's 1,200 pixels, every one kept
    assert np.array_equal(moved.foreground, model.foreground)
    assert moved.background_sample is model.background_sample  # never the surroundings' own
    # blue was unknown to the background; now the background has it, and red is still the object
    assert mixture_log_likelihood(red_blue[1:], model.background)[0] < -100
    assert mixture_log_likelihood(red_blue[1:], moved.background)[0] > -10
    assert moved.evidence(red_blue).tolist() == [COLOUR_LIMIT, -COLOUR_LIMIT]
    assert model.with_surroundings(blue[:0]) is model


def test_evidence_map_of_an_empty_region_is_empty() -> None:
    image, square = two_colour_frame()
    evidence = EvidenceMap(image, colour_model(image, square))

    assert evidence.at(np.zeros_like(square)).shape == (0,)


def test_a_model_keeps_its_background_sample_alone() -> None:
    image, square = two_colour_frame()
    sample = colour_model(image, square).background_sample

    assert sample.base is None  # its own memory, not a view of every outside pixel


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
