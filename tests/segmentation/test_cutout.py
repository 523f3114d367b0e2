from __future__ import annotations

import numpy as np

from segmentation.engines.cutout import COLOUR_LIMIT, EvidenceMap, colour_model


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
