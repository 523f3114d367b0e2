"""Filling small holes in masks on the device, without a round trip to the host.

A hole is an 8-connected component of background pixels of at most ``max_area`` pixels (as in
SAM 2's post-processing, which does it with a CUDA extension of its own). Components are found
by label propagation: every background pixel starts with its own index as label and takes the
smallest label around it, ``max_area - 1`` times, which is enough for any component of at most
``max_area`` pixels to agree on one label. A label counts as a whole component only where it has
settled (no pixel carrying it has a background neighbour with another label), so a large
component, still split into several labels, is never taken for a small one. Plain tensor
operations throughout: a fixed number of kernels per frame and no synchronization, where copying
the mask to the host for a connected-components pass would stall the device once a frame.
Masks already on the host (the CPU device) take that pass: OpenCV's connected components.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
import torch.nn.functional as F

MAX_AREA = 64  # label propagation takes max_area - 1 steps: keep the kernels per frame bounded


def small_holes(background: torch.Tensor, max_area: int) -> torch.Tensor:
    """The pixels of ``background`` (``B x 1 x H x W``, bool) that lie in 8-connected
    components of at most ``max_area`` pixels."""
    if not 1 <= max_area <= MAX_AREA:
        raise ValueError(f"max_area must be within 1..{MAX_AREA}, got {max_area}")
    batch, _, height, width = background.shape
    pixels = height * width
    if pixels >= 2**24:  # labels travel as float32, exact up to 2**24
        raise ValueError(f"{height}x{width} is too large to label")
    index = torch.arange(pixels, device=background.device, dtype=torch.float32)
    index = index.view(1, 1, height, width)
    outside = float(pixels)  # the label of foreground pixels: larger than any index
    labels = torch.where(background, index, outside)
    for _ in range(max_area - 1):
        smallest = -F.max_pool2d(-labels, 3, stride=1, padding=1)
        labels = torch.where(background, smallest, outside)
    smallest = -F.max_pool2d(-labels, 3, stride=1, padding=1)
    largest = F.max_pool2d(torch.where(background, labels, -1.0), 3, stride=1, padding=1)
    unsettled = background & ((smallest != labels) | (largest != labels))
    flat = labels.view(batch, pixels).long()
    counts = torch.zeros(batch, pixels + 1, device=background.device)
    counts.scatter_add_(1, flat, background.view(batch, pixels).float())
    open_labels = torch.zeros(batch, pixels + 1, device=background.device)
    open_labels.scatter_reduce_(1, flat, unsettled.view(batch, pixels).float(), reduce="amax")
    hole_labels = (counts <= max_area) & (open_labels == 0)
    return background & torch.gather(hole_labels, 1, flat).view_as(background)


def small_holes_on_host(background: torch.Tensor, max_area: int) -> torch.Tensor:
    """:func:`small_holes` for masks in host memory, by OpenCV's connected components: on the
    CPU, label propagation's many passes cost ten times as much."""
    if not 1 <= max_area <= MAX_AREA:
        raise ValueError(f"max_area must be within 1..{MAX_AREA}, got {max_area}")
    holes = np.zeros(background.shape, dtype=bool)
    for index, mask in enumerate(background.numpy()[:, 0]):
        _, labels, stats, _ = cv2.connectedComponentsWithStats(mask.view(np.uint8), connectivity=8)
        small = stats[:, cv2.CC_STAT_AREA] <= max_area
        small[0] = False  # label 0: the pixels that are not background
        holes[index, 0] = small[labels]
    return torch.from_numpy(holes)


def holes_filled(logits: torch.Tensor, max_area: int, value: float) -> torch.Tensor:
    """``logits`` (``B x 1 x H x W``) with the holes of at most ``max_area`` pixels in each
    mask (``logits > 0``) set to ``value``."""
    if max_area <= 0:
        return logits
    on_host = logits.device.type == "cpu"
    find = small_holes_on_host if on_host else small_holes
    return logits.masked_fill(find(logits <= 0, max_area), value)
