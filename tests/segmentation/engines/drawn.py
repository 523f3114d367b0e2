"""A long video drawn frame by frame on demand: a textured disc going to and fro over a textured
floor. Small in pixels and never decoded, so that tests can run engines over thousands of
frames; each frame's true mask is known. And the store a session keeps beside an engine, as a
dict (``VideoState.recall``)."""

from __future__ import annotations

import numpy as np

from segmentation.engines.base import Masks
from segmentation.engines.frames import FrameSource

WIDTH, HEIGHT = 96, 64
RADIUS = 14
PERIOD = 120  # frames the disc takes to go across and back


class DrawnFrames(FrameSource):
    def __init__(self, count: int) -> None:
        super().__init__(cache_bytes=64 * WIDTH * HEIGHT * 3)
        self.width, self.height, self.fps = WIDTH, HEIGHT, 24.0
        self._count = count
        random = np.random.default_rng(3)
        ys, xs = np.mgrid[:HEIGHT, :WIDTH]
        floor = np.stack([60 + 60 * xs / WIDTH, 120 + 40 * ys / HEIGHT, np.full(xs.shape, 90.0)])
        self._floor = floor.transpose(1, 2, 0) + random.normal(0, 6, (HEIGHT, WIDTH, 3))
        self._texture = random.normal(0, 10, (HEIGHT, WIDTH, 3))

    def __len__(self) -> int:
        return self._count

    def mask(self, index: int) -> np.ndarray:
        """The disc's true mask on frame ``index``."""
        phase = (index % PERIOD) / PERIOD
        x = RADIUS + 4 + (WIDTH - 2 * RADIUS - 8) * (1 - abs(2 * phase - 1))
        ys, xs = np.mgrid[:HEIGHT, :WIDTH]
        return (xs - x) ** 2 + (ys - HEIGHT / 2) ** 2 <= RADIUS**2

    def point(self, index: int) -> list[float]:
        """The disc's centre on frame ``index``, normalized."""
        ys, xs = np.nonzero(self.mask(index))
        return [float(xs.mean()) / (WIDTH - 1), float(ys.mean()) / (HEIGHT - 1)]

    def _decode(self, index: int) -> np.ndarray:
        image = self._floor.copy()
        disc = self.mask(index)
        image[disc] = np.array([220.0, 40.0, 40.0]) + self._texture[disc]
        return self._keep(index, np.clip(image, 0, 255).astype(np.uint8))


class Store:
    """What a session's store holds: every mask the state yielded or answered, as shown."""

    def __init__(self) -> None:
        self.frames: dict[int, Masks] = {}

    def keep(self, frame_index: int, masks: Masks) -> Masks:
        self.frames.setdefault(frame_index, {}).update(masks)
        return masks

    def recall(self, frame_index: int) -> Masks:
        return dict(self.frames.get(frame_index, {}))
