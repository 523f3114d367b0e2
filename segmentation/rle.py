"""Masks as COCO run-length encoding (pycocotools): column-major runs, counts as a string."""

from __future__ import annotations

import numpy as np
from pycocotools import mask as coco_mask


def rle_encode(mask: np.ndarray) -> dict[str, object]:
    """``{"size": [H, W], "counts": "..."}`` of a boolean H x W mask."""
    encoded = coco_mask.encode(np.asfortranarray(mask, dtype=np.uint8))
    return {"size": [int(n) for n in encoded["size"]], "counts": encoded["counts"].decode("ascii")}


def rle_decode(rle: object) -> np.ndarray:
    """The boolean mask of an RLE dict; :class:`ValueError` if it is not a valid one."""
    if not isinstance(rle, dict) or set(rle) - {"size", "counts"} or len(rle) != 2:
        raise ValueError('a mask must be {"size": [H, W], "counts": "<COCO RLE>"}')
    size, counts = rle["size"], rle["counts"]
    if (
        not isinstance(size, list)
        or len(size) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in size)
    ):
        raise ValueError("a mask's size must be [H, W], two positive integers")
    if not isinstance(counts, str) or not counts.isascii():
        raise ValueError("a mask's counts must be a COCO RLE string")
    height, width = size
    if sum(runs(counts)) != height * width:
        raise ValueError(f"a mask's runs do not add up to its size {height} x {width}")
    # Safe now: pycocotools writes the runs without checking them against the size.
    decoded = coco_mask.decode({"size": [height, width], "counts": counts.encode("ascii")})
    return decoded.astype(bool)


def runs(counts: str) -> list[int]:
    """The run lengths in a COCO RLE string: each a little-endian series of 5-bit groups (plus
    48, with 0x20 meaning "more follows" and 0x10 in the last group the sign), and from the
    fourth on, stored as the difference to the run two places before."""
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
