"""Videos long in frames and tiny in pixels whose every frame shows its own index (12 blocks of
16x16, black or white, one bit each), so that a decoder's frame says which source frame it is."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

WIDTH, HEIGHT = 64, 48
BLOCK = 16
BITS = 12  # up to 4,095 frames


def numbered_image(index: int) -> np.ndarray:
    image = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    for bit in range(BITS):
        row, column = divmod(bit, WIDTH // BLOCK)
        if index >> bit & 1:
            image[row * BLOCK : (row + 1) * BLOCK, column * BLOCK : (column + 1) * BLOCK] = 255
    return image


def index_shown(image: np.ndarray) -> int:
    """The index a decoded frame of a numbered video shows."""
    index = 0
    for bit in range(BITS):
        row, column = divmod(bit, WIDTH // BLOCK)
        block = image[row * BLOCK : (row + 1) * BLOCK, column * BLOCK : (column + 1) * BLOCK]
        if block.mean() > 128:
            index |= 1 << bit
    return index


def write_numbered(
    path: Path,
    times: Sequence[float],
    *,
    container_format: str | None = None,
    time_base: Fraction = Fraction(1, 12288),
    rate: int = 24,
    gop: int = 24,
) -> Path:
    """Frame ``i`` shown from ``times[i]`` seconds, H.264 with B-frames, in ``time_base``."""
    with av.open(str(path), "w", format=container_format) as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.time_base = stream.codec_context.time_base = time_base
        stream.options = {"g": str(gop), "bf": "2", "preset": "ultrafast"}
        for index, at in enumerate(times):
            frame = av.VideoFrame.from_ndarray(numbered_image(index), format="rgb24")
            frame.pts, frame.time_base = round(at / time_base), time_base
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def decoded(path: Path) -> list[tuple[float, int]]:
    """Every frame the decoder yields: its time, and the index it shows."""
    with av.open(str(path)) as container:
        return [
            (frame.time, index_shown(frame.to_ndarray(format="rgb24")))
            for frame in container.decode(video=0)
        ]
