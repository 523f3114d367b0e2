from __future__ import annotations

import numpy as np
import pytest
from pycocotools import mask as coco_mask

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


def reference_runs(counts: str) -> list[int]:
    """The runs of a counts string read a character at a time (the parser ``rle.py`` had until
    issue 47, 90 ms for a mask of isolated pixels): what the vectorised one must agree with."""
    lengths: list[int] = []
    position = 0
    while position < len(counts):
        value, shift, more = 0, 0, True
        while more:
            if position == len(counts):
                raise ValueError("a mask's counts end in the middle of a number")
            group = ord(counts[position]) - 48
            if not 0 <= group < 64:
                raise ValueError("a mask's counts hold a character outside COCO RLE's alphabet")
            value |= (group & 0x1F) << shift
            more = bool(group & 0x20)
            position += 1
            shift += 5
            if not more and group & 0x10:
                value -= 1 << shift
        if len(lengths) > 2:
            value += lengths[-2]
        if value < 0:
            raise ValueError("a mask's counts hold a negative run")
        lengths.append(value)
    return lengths


def reference_decode(rle: dict) -> np.ndarray | str:
    """The mask, or the message refusing it, as the reference reads ``rle``; a run longer than
    the whole mask is named as the fault where it comes before any other."""
    (height, width), counts = rle["size"], rle["counts"]
    area = height * width
    for end in range(len(counts) + 1):  # the runs read before the first fault
        try:
            read = reference_runs(counts[:end])
        except ValueError:
            continue
        if any(length > area for length in read):
            return f"a mask's runs do not add up to its size {height} x {width}"
    try:
        lengths = reference_runs(counts)
    except ValueError as error:
        return str(error)
    if sum(lengths) != area:
        return f"a mask's runs do not add up to its size {height} x {width}"
    return np.repeat(np.arange(len(lengths)) % 2 == 1, lengths).reshape((height, width), order="F")


# characters of long numbers (0 and 31, with and without "more follows", either sign) are
# drawn more often, beside the rest of the alphabet and a few outside it
CHARACTERS = "P0o_O?/@`p" * 4 + "".join(map(chr, range(48, 112))) + "~ /"


def test_counts_are_read_as_the_reference_reads_them() -> None:
    random = np.random.default_rng(47)
    for _ in range(3000):
        size = [int(n) for n in random.integers(1, 6, 2)]
        counts = "".join(random.choice(list(CHARACTERS), int(random.integers(0, 30))))
        rle = {"size": size, "counts": counts}

        wanted = reference_decode(rle)

        if isinstance(wanted, str):
            with pytest.raises(ValueError, match=r"^a mask") as raised:
                rle_decode(rle)
            assert str(raised.value) == wanted, counts
        else:
            assert np.array_equal(rle_decode(rle), wanted), counts


@pytest.mark.parametrize(
    ("counts", "outcome"),
    [
        ("P" * 14 + "0" + "4", [0, 4]),  # a zero of 15 characters
        ("o" * 14 + "O" + "4", "a mask's counts hold a negative run"),  # -1 of 15
        ("o" * 13 + "?" + "4", "a mask's runs do not add up to its size 2 x 2"),  # 2**70 - 1
    ],
)
def test_numbers_of_many_characters_are_read_to_their_value(
    counts: str, outcome: list[int] | str
) -> None:
    rle = {"size": [2, 2], "counts": counts}

    if isinstance(outcome, str):
        with pytest.raises(ValueError, match=r"^a mask") as raised:
            rle_decode(rle)
        assert str(raised.value) == outcome == reference_decode(rle)
    else:
        assert runs(counts) == reference_runs(counts) == outcome
        assert np.array_equal(rle_decode(rle), reference_decode(rle))


def test_a_mask_of_isolated_pixels_decodes_as_pycocotools_decodes_it() -> None:
    mask = np.zeros((480, 854), bool)
    mask[::2, ::2] = True
    rle = rle_encode(mask)

    assert runs(rle["counts"]) == reference_runs(rle["counts"])
    assert np.array_equal(rle_decode(rle), mask)
    assert np.array_equal(
        rle_decode(rle),
        coco_mask.decode({"size": rle["size"], "counts": rle["counts"].encode()}).astype(bool),
    )
