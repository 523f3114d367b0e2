"""The work around the ``sam2`` model: frames prepared ahead, masks finished behind, on each
device this machine has (on CUDA: the side streams, the events and the pinned copies; their
speed is measured by benchmarks/sam2_host.py)."""

from __future__ import annotations

import threading

import numpy as np
import torch

from segmentation.engines.frames import FrameSource
from segmentation.engines.sam2.pipeline import IMAGE_MEAN, IMAGE_STD, FramesAhead, MasksBehind


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


def test_a_frame_prepared_ahead_is_decoded_in_the_background_and_normalized(device) -> None:
    frames = PlainFrames()
    ahead = FramesAhead(frames, 16, device)

    ahead.fetch(5)
    prepared = ahead.take(5).cpu()
    now = ahead.take(6).cpu()  # not fetched: prepared on this thread
    ahead.close()

    assert (prepared.shape, now.shape) == ((1, 3, 16, 16), (1, 3, 16, 16))
    assert torch.allclose(prepared, normalized((5, 10, 15)), rtol=0, atol=1e-6)
    assert torch.allclose(now, normalized((6, 12, 18)), rtol=0, atol=1e-6)
    assert frames.decoded_in == ["sam2-frames", "MainThread"]


def test_frames_fetched_ahead_and_forgotten_are_each_their_own(device) -> None:
    # the propagation asks for the next frame while it works on this one, and sometimes goes
    # elsewhere: each frame taken is its own, whether prepared ahead, dropped, or prepared now
    frames = PlainFrames()
    ahead = FramesAhead(frames, 16, device)

    taken = {}
    for index in (0, 1, 2, 3, 4, 5, 6):
        ahead.fetch(index)
        ahead.fetch(7 - index)  # more than AHEAD in flight: the oldest is forgotten
        taken[index] = ahead.take(index)
    ahead.close()

    for index, image in taken.items():
        expected = normalized((index, 2 * index, 3 * index))
        assert torch.allclose(image.cpu(), expected, rtol=0, atol=1e-6), index


def test_masks_go_to_the_object_with_the_highest_positive_logit(device) -> None:
    behind = MasksBehind(4, 4, device)
    top = torch.tensor([[5.0, 5.0], [-5.0, -5.0]]).view(1, 1, 2, 2)  # rows 5, 2.5, -2.5, -5
    everywhere = torch.full((1, 1, 2, 2), 3.0)

    masks = behind.finish({2: everywhere, 3: None, 1: top}).result()
    behind.close()

    rows = np.array([True, False, False, False])[:, None].repeat(4, axis=1)
    assert list(masks) == [2, 3, 1]
    assert masks[1].tolist() == rows.tolist()
    assert masks[2].tolist() == (~rows).tolist()
    assert masks[3].tolist() == np.zeros((4, 4), bool).tolist()


def test_masks_finished_while_the_next_frames_are_launched_are_each_their_own(device) -> None:
    # each frame's masks are launched before the previous frame's have reached the host, and
    # the logits they came from are overwritten at once, as the model's next frame does
    behind = MasksBehind(48, 64, device)
    logits = torch.empty(1, 1, 12, 16, device=device)
    pending = []
    cells = torch.arange(12 * 16, device=device).view(1, 1, 12, 16)
    for frame in range(24):  # frame f: its first 8 f cells in raster order are the object
        logits.copy_(torch.where(cells < 8 * frame, 10.0, -10.0))
        pending.append(behind.finish({1: logits}))
        logits.fill_(-1.0)
    masks = [future.result()[1] for future in pending]
    behind.close()

    for frame, mask in enumerate(masks):
        expected = np.arange(12 * 16).reshape(12, 16) < 8 * frame
        assert mask.shape == (48, 64)
        # upsampled 4 times, the pixel nearest each cell's centre has the cell's sign
        assert mask[2::4, 2::4].tolist() == expected.tolist(), frame


def test_no_logits_give_empty_masks(device) -> None:
    behind = MasksBehind(2, 3, device)

    masks = behind.finish({7: None}).result()
    behind.close()

    assert list(masks) == [7]
    assert masks[7].tolist() == [[False] * 3] * 2
