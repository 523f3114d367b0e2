"""The work around the ``sam2`` model: frames prepared ahead, masks finished behind (on the
CPU; the GPU's streams and pinned copies are measured by benchmarks/sam2_host.py)."""

from __future__ import annotations

import threading

import numpy as np
import torch

from segmentation.engines.frames import FrameSource
from segmentation.engines.sam2.pipeline import IMAGE_MEAN, IMAGE_STD, FramesAhead, MasksBehind

CPU = torch.device("cpu")


class PlainFrames(FrameSource):
    """Frames of one colour each: frame ``i`` is ``(i, 2i, 3i)``; counts who decoded them."""

    width, height, fps = 6, 4, 24.0

    def __init__(self) -> None:
        super().__init__()
        self.decoded_in: list[str] = []

    def __len__(self) -> int:
        return 8

    def _decode(self, index: int) -> np.ndarray:
        self.decoded_in.append(threading.current_thread().name.split("_")[0])
        image = np.empty((self.height, self.width, 3), np.uint8)
        image[:] = (index, 2 * index, 3 * index)
        return self._keep(index, image)


def normalized(colour: tuple[int, int, int]) -> torch.Tensor:
    """A 16 x 16 input of one ``colour``, normalized as the model wants it."""
    pixels = (torch.tensor(colour) / 255 - torch.tensor(IMAGE_MEAN)) / torch.tensor(IMAGE_STD)
    return pixels.view(1, 3, 1, 1).expand(1, 3, 16, 16)


def test_a_frame_prepared_ahead_is_decoded_in_the_background_and_normalized() -> None:
    frames = PlainFrames()
    ahead = FramesAhead(frames, 16, CPU)

    ahead.fetch(5)
    prepared = ahead.take(5)
    now = ahead.take(6)  # not fetched: prepared on this thread
    ahead.close()

    assert (prepared.shape, now.shape) == ((1, 3, 16, 16), (1, 3, 16, 16))
    assert torch.allclose(prepared, normalized((5, 10, 15)), rtol=0, atol=1e-6)
    assert torch.allclose(now, normalized((6, 12, 18)), rtol=0, atol=1e-6)
    assert frames.decoded_in == ["sam2-frames", "MainThread"]


def test_masks_go_to_the_object_with_the_highest_positive_logit() -> None:
    behind = MasksBehind(4, 4, CPU)
    top = torch.tensor([[5.0, 5.0], [-5.0, -5.0]]).view(1, 1, 2, 2)  # rows 5, 2.5, -2.5, -5
    everywhere = torch.full((1, 1, 2, 2), 3.0)

    masks = behind.finish({2: everywhere, 3: None, 1: top}).result()
    behind.close()

    rows = np.array([True, False, False, False])[:, None].repeat(4, axis=1)
    assert list(masks) == [2, 3, 1]
    assert masks[1].tolist() == rows.tolist()
    assert masks[2].tolist() == (~rows).tolist()
    assert masks[3].tolist() == np.zeros((4, 4), bool).tolist()


def test_no_logits_give_empty_masks() -> None:
    behind = MasksBehind(2, 3, CPU)

    masks = behind.finish({7: None}).result()
    behind.close()

    assert list(masks) == [7]
    assert masks[7].tolist() == [[False] * 3] * 2
