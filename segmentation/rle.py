"""Masks as COCO run-length encoding (pycocotools): column-major runs, counts as a string.

A counts string is read with numpy, every character at once, rather than a run at a time:
a mask of isolated pixels has hundreds of thousands of runs, which a Python loop took 90 ms
to read, holding the interpreter lock (docs/reliability.md, defect 4). pycocotools' own reader
(``rleFrString``, behind ``decode``) checks nothing: it shifts each character into a C ``int``
(a number of over 6 characters overflows it), keeps the runs unsigned (a negative one wraps),
reads on past the end of a string that ends inside a number, and ``rleDecode`` writes runs past
the size past the mask. So the runs are read and checked here, and the mask is drawn from them
here too.
"""

from __future__ import annotations

import numpy as np
from pycocotools import mask as coco_mask

# A number is read to its low 50 bits (10 characters); one that does not fit them is at least
# 2**49 long or short, so it is held there: past any mask this module draws.
_READ_GROUPS = 10
_HELD = 1 << (5 * _READ_GROUPS - 1)
LARGEST_AREA = 1 << 48  # pixels; far past any video, and short of _HELD


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
    if height * width >= LARGEST_AREA:
        raise ValueError(f"a mask's size {height} x {width} is past any video's")
    lengths = _runs(counts, area=height * width)
    if lengths is None:
        raise ValueError(f"a mask's runs do not add up to its size {height} x {width}")
    values = np.zeros(len(lengths), bool)
    values[1::2] = True  # runs alternate, zeros first
    return np.repeat(values, lengths).reshape((height, width), order="F")


def runs(counts: str) -> list[int]:
    """The run lengths in a COCO RLE string: each a little-endian series of 5-bit groups (plus
    48, with 0x20 meaning "more follows" and 0x10 in the last group the sign), and from the
    fourth on, stored as the difference to the run two places before. :class:`ValueError` if
    a character is outside that alphabet, the string ends in the middle of a number, a run is
    negative, or one is of :data:`LARGEST_AREA` or more."""
    lengths = _runs(counts, area=LARGEST_AREA - 1, whole=False)
    if lengths is None:
        raise ValueError(f"a mask's counts hold a run of {LARGEST_AREA} or more")
    return lengths.tolist()


def _runs(counts: str, *, area: int, whole: bool = True) -> np.ndarray | None:
    """The runs of ``counts`` (see :func:`runs`), or None if one is longer than ``area`` or
    (``whole``) they do not add up to it; the first fault in the string is the one named."""
    characters = np.frombuffer(counts.encode("ascii"), np.uint8)
    outside = np.flatnonzero((characters < 48) | (characters >= 112))
    codes = (characters[: outside[0]] if len(outside) else characters) - np.uint8(48)
    ends = np.flatnonzero((codes & 0x20) == 0)  # the last character of each number
    lengths = _lengths(codes, ends)
    fault = np.flatnonzero((lengths < 0) | (lengths > area))
    if len(fault):
        if lengths[fault[0]] < 0:
            raise ValueError("a mask's counts hold a negative run")
        return None
    if len(outside):
        raise ValueError("a mask's counts hold a character outside COCO RLE's alphabet")
    if len(codes) and (ends[-1] if len(ends) else -1) != len(codes) - 1:
        raise ValueError("a mask's counts end in the middle of a number")
    if whole:
        if len(lengths) * area < 1 << 63:
            total = int(lengths.sum())
        else:  # each run is within the area, so a running total cannot wrap before passing it
            running = np.cumsum(lengths)
            total = area + 1 if (running > area).any() else int(running[-1])
        if total != area:
            return None
    return lengths


def _lengths(codes: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The runs of the whole numbers in ``codes`` (ending at ``ends``): exact while within
    [0, area], and any other held at +-2**49 (see :func:`_runs`), which is enough to tell which
    way the first of them is out."""
    if len(ends) == 0:
        return np.zeros(0, np.int64)
    starts = np.concatenate(([0], ends[:-1] + 1))
    groups = ends - starts + 1
    payload = (codes & 0x1F).astype(np.int64)
    negative = (codes[ends] & 0x10) != 0
    low = payload[starts]
    # a loop over a number's characters, each step over every number at once
    for place in range(1, min(int(groups.max()), _READ_GROUPS)):
        longer = np.flatnonzero(groups > place)
        low[longer] += payload[starts[longer] + place] << (5 * place)
    raw = low
    signed = np.flatnonzero(negative)
    raw[signed] -= np.int64(1) << (5 * np.minimum(groups[signed], _READ_GROUPS))
    long = np.flatnonzero(groups > _READ_GROUPS)
    if len(long):
        # a longer number fits the low bits if the rest only repeat its sign (31s, or 0s) and
        # the top bit read is that sign too; any other is out of every mask, either way
        chars = groups[long]
        first = np.repeat(starts[long], chars)
        place = np.arange(len(first)) - np.repeat(np.cumsum(chars) - chars, chars)
        sign = np.repeat(negative[long], chars)
        at = payload[first + place]
        beyond = (place >= _READ_GROUPS) & (at != np.where(sign, 0x1F, 0))
        beyond |= (place == _READ_GROUPS - 1) & (((at >> 4) & 1) != sign)
        fits = ~np.logical_or.reduceat(beyond, np.cumsum(chars) - chars)
        raw[long] = np.where(fits, raw[long], np.where(negative[long], -_HELD, _HELD))
    raw = np.clip(raw, -_HELD, _HELD)
    # from the fourth on, each is stored as the difference to the one two places before: the
    # runs at odd places are a running total, and so are those at even places from the third
    lengths = raw.copy()
    lengths[1::2] = np.cumsum(raw[1::2])
    lengths[2::2] = np.cumsum(raw[2::2])
    return lengths
