from __future__ import annotations

import numpy as np
import pytest

from segmentation.rle import rle_decode, rle_encode, runs


def test_encode_is_column_major_coco_rle() -> None:
    mask = np.zeros((4, 5), bool)
    mask[1:3, 2:4] = True

    rle = rle_encode(mask)

    # column-major: 9 zeros (columns 0, 1 and row 0 of column 2), 2 ones, 2 zeros, 2 ones, 5 zeros
    assert rle == {"size": [4, 5], "counts": "92203"}
    assert runs(rle["counts"]) == [9, 2, 2, 2, 5]


def test_round_trip_of_random_masks() -> None:
    random = np.random.default_rng(5)
    for _ in range(200):
        height, width = random.integers(1, 80, 2)
        mask = random.random((height, width)) < random.random()

        assert np.array_equal(rle_decode(rle_encode(mask)), mask)


def test_long_runs_use_several_characters_and_deltas() -> None:
    mask = np.zeros((480, 854), bool)
    mask[100:300, 200:600] = True

    rle = rle_encode(mask)

    assert runs(rle["counts"])[:3] == [200 * 480 + 100, 200, 280]
    assert sum(runs(rle["counts"])) == 480 * 854
    assert np.array_equal(rle_decode(rle), mask)


@pytest.mark.parametrize(
    ("rle", "message"),
    [
        ({"size": [4, 5], "counts": "9"}, "a mask's runs do not add up to its size 4 x 5"),
        ({"size": [4, 5], "counts": ""}, "a mask's runs do not add up to its size 4 x 5"),
        # a huge run that would write far past the mask in pycocotools
        ({"size": [4, 5], "counts": "ooooo1"}, "a mask's runs do not add up to its size 4 x 5"),
        (
            {"size": [4, 5], "counts": "~~"},
            "a mask's counts hold a character outside COCO RLE's alphabet",
        ),
        ({"size": [4, 5], "counts": "9P"}, "a mask's counts end in the middle of a number"),
        ({"size": [4, 5], "counts": "9@"}, "a mask's counts hold a negative run"),
        ({"size": [4], "counts": "0"}, "a mask's size must be [H, W], two positive integers"),
        ({"size": [0, 5], "counts": "0"}, "a mask's size must be [H, W], two positive integers"),
        ({"size": [4, True], "counts": "0"}, "a mask's size must be [H, W], two positive integers"),
        ({"size": [4, 5], "counts": [20]}, "a mask's counts must be a COCO RLE string"),
        ({"size": [4, 5]}, 'a mask must be {"size": [H, W], "counts": "<COCO RLE>"}'),
        ([4, 5], 'a mask must be {"size": [H, W], "counts": "<COCO RLE>"}'),
    ],
)
def test_invalid_rle_is_refused(rle: object, message: str) -> None:
    with pytest.raises(ValueError, match=r"^a mask") as raised:
        rle_decode(rle)

    assert str(raised.value) == message
