from __future__ import annotations

import numpy as np

from segmentation.engines.classic.cutout import COLOUR_LIMIT, EvidenceMap, colour_model
from segmentation.engines.classic.graphcut import mixture_log_likelihood


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
