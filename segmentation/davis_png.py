"""Label images in the DAVIS layout: 8-bit palette PNGs whose pixel values are object IDs
(0 is the background), coloured with the DAVIS (PASCAL VOC) colour map."""

from __future__ import annotations

from typing import BinaryIO

import numpy as np
from PIL import Image


def davis_palette() -> list[int]:
    """The DAVIS colour map: object n gets the colour of n's bits spread over R, G and B."""
    palette = []
    for index in range(256):
        red = green = blue = 0
        value = index
        for bit in range(8):
            red |= ((value >> 0) & 1) << (7 - bit)
            green |= ((value >> 1) & 1) << (7 - bit)
            blue |= ((value >> 2) & 1) << (7 - bit)
            value >>= 3
        palette += [red, green, blue]
    return palette


def labels_png_write(labels: np.ndarray, file: str | BinaryIO) -> None:
    """Write an H x W uint8 array of object IDs as a DAVIS palette PNG."""
    image = Image.fromarray(labels.astype(np.uint8, copy=False), mode="P")
    image.putpalette(davis_palette())
    image.save(file, format="PNG")
