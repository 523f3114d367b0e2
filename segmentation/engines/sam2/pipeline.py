"""The work around the model, kept off the thread that launches its kernels.

A GPU runs kernels asynchronously: what bounds a small model there is the thread that launches
them, and whatever else that thread does per frame delays the next frame's kernels. Two helpers
take that work away:

- :class:`FramesAhead` decodes and preprocesses the next frame in a background thread while
  the model works on this one: the pixels are copied into pinned memory, uploaded, resized and
  normalized on a side stream (on the CPU, all of it in that thread), so that the model finds
  its input ready;
- :class:`MasksBehind` turns a frame's mask logits into the video's masks in another thread,
  while the next frame is launched. On a GPU the launching thread only launches the few
  kernels that resize and threshold the logits and a non-blocking copy of the masks into pinned
  memory; the other thread waits for the copy. (Finishing three objects' masks at 1280x720
  took 18-38 ms on a 2-core host: longer than a small model's frame on a GPU.) On the CPU,
  that thread does the arithmetic itself.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from segmentation.engines.base import Masks
from segmentation.engines.frames import FrameSource

IMAGE_MEAN = (0.485, 0.456, 0.406)
IMAGE_STD = (0.229, 0.224, 0.225)
AHEAD = 2  # frames prepared ahead at most: the next, and one the propagation left behind


def _side_stream(device: torch.device) -> torch.cuda.Stream | None:
    return torch.cuda.Stream(device) if device.type == "cuda" else None


@dataclass(frozen=True)
class _Prepared:
    image: torch.Tensor  # 1 x 3 x S x S, normalized, on the device
    ready: torch.cuda.Event | None  # recorded on the side stream after its last kernel


class FramesAhead:
    """The model's input for each frame (``1 x 3 x S x S``, normalized), the frames asked for
    ahead prepared in a background thread."""

    def __init__(self, frames: FrameSource, size: int, device: torch.device) -> None:
        self._frames = frames
        self._size = size
        self._device = device
        self._side = _side_stream(device)
        self._mean = torch.tensor(IMAGE_MEAN, device=device).view(1, 3, 1, 1)
        self._std = torch.tensor(IMAGE_STD, device=device).view(1, 3, 1, 1)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sam2-frames")
        self._ahead: OrderedDict[int, Future[_Prepared]] = OrderedDict()

    def fetch(self, index: int) -> None:
        """Start preparing frame ``index`` in the background; the oldest of more than
        ``AHEAD`` frames so prepared is forgotten (the propagation went elsewhere)."""
        if index not in self._ahead:
            self._ahead[index] = self._worker.submit(self._prepared, index, self._side)
        while len(self._ahead) > AHEAD:
            self._ahead.popitem(last=False)[1].cancel()

    def take(self, index: int) -> torch.Tensor:
        """Frame ``index``'s input, usable on this thread's stream: the one prepared ahead, or
        prepared now."""
        ahead = self._ahead.pop(index, None)
        if ahead is None:
            return self._prepared(index, None).image
        prepared = ahead.result()
        if prepared.ready is not None:
            stream = torch.cuda.current_stream(self._device)
            stream.wait_event(prepared.ready)  # the device waits; this thread does not
            prepared.image.record_stream(stream)
        return prepared.image

    def _prepared(self, index: int, side: torch.cuda.Stream | None) -> _Prepared:
        image = self._frames.frame(index)
        pinned = torch.empty(image.shape, dtype=torch.uint8, pin_memory=side is not None)
        np.copyto(pinned.numpy(), image)  # the frame source's array is read-only and shared
        on_side = torch.cuda.stream(side) if side is not None else contextlib.nullcontext()
        with torch.inference_mode(), on_side:
            pixels = pinned.to(self._device, non_blocking=True)
            pixels = pixels.permute(2, 0, 1)[None].float() / 255.0
            size = (self._size, self._size)
            pixels = F.interpolate(pixels, size, mode="bilinear", antialias=True)
            image = (pixels - self._mean) / self._std
            ready = None
            if side is not None:
                ready = torch.cuda.Event()
                ready.record(side)
        return _Prepared(image, ready)

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=True)
        self._ahead.clear()


def masks_owned(logits: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``N x 1 x h x w`` mask logits to ``N x height x width`` masks: each pixel goes to the
    object with the highest positive logit there."""
    scaled = F.interpolate(logits.float(), (height, width), mode="bilinear", align_corners=False)
    # max's indices, not argmax: on the CPU argmax across objects ran 20x slower
    best = scaled.max(dim=0, keepdim=True).indices
    owner = torch.arange(len(logits), device=scaled.device).view(-1, 1, 1, 1)
    return ((scaled > 0) & (best == owner))[:, 0]


class MasksBehind:
    """Each frame's masks at the video's resolution, finished in another thread."""

    def __init__(self, height: int, width: int, device: torch.device) -> None:
        self._height, self._width = height, width
        self._device = device
        self._side = _side_stream(device)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sam2-masks")

    def finish(self, logits: dict[int, torch.Tensor | None]) -> Future[Masks]:
        """The masks of ``logits`` (per object, ``1 x 1 x h x w`` or ``None``: no mask), on
        their way; on a GPU, the kernels that make them are launched before this returns."""
        order = list(logits)
        present = [object_id for object_id, value in logits.items() if value is not None]
        if not present:
            return self._worker.submit(self._masks, order, present, None)
        stacked = torch.cat([logits[object_id].to(self._device) for object_id in present])
        if self._side is None:
            return self._worker.submit(self._masks, order, present, stacked)
        host, ready = self._launched(stacked)
        return self._worker.submit(self._copied, order, present, host, ready)

    def _launched(self, stacked: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event]:
        """On a GPU: the masks made on the device and copied to pinned memory on the side
        stream, with the event that says the copy is done."""
        owned = masks_owned(stacked, self._height, self._width)
        side = self._side
        side.wait_stream(torch.cuda.current_stream(self._device))
        with torch.cuda.stream(side):
            owned.record_stream(side)
            host = owned.to("cpu", non_blocking=True)  # into pinned memory
            ready = torch.cuda.Event()
            ready.record(side)
        return host, ready

    def _copied(
        self, order: list[int], present: list[int], host: torch.Tensor, ready: torch.cuda.Event
    ) -> Masks:
        ready.synchronize()
        return self._assembled(order, present, host.numpy())

    def _masks(self, order: list[int], present: list[int], stacked: torch.Tensor | None) -> Masks:
        if stacked is None:
            return self._assembled(order, present, None)
        with torch.inference_mode():
            owned = masks_owned(stacked, self._height, self._width)
        return self._assembled(order, present, owned.cpu().numpy())  # .cpu(): on MPS

    def _assembled(self, order: list[int], present: list[int], owned: np.ndarray | None) -> Masks:
        chosen = dict(zip(present, owned, strict=True)) if owned is not None else {}
        size = (self._height, self._width)
        return {
            object_id: chosen[object_id] if object_id in chosen else np.zeros(size, dtype=bool)
            for object_id in order
        }

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=True)
