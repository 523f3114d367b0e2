"""Synthetic videos with known masks: textured shapes moving over a textured background.

Deterministic (a seeded generator), small and quick to make, so tests can check what an engine
finds against the exact truth. Written as an H.264 MP4 with PyAV, or in the DAVIS layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import av
import cv2
import numpy as np
from PIL import Image

WIDTH, HEIGHT = 320, 192


@dataclass(frozen=True)
class Shape:
    object_id: int
    kind: str  # "disc" or "box"
    colour: tuple[int, int, int]
    start: tuple[float, float]  # centre at frame 0, pixels
    velocity: tuple[float, float]  # pixels per frame
    size: int  # radius, or half the side


# Two objects far apart in colour from each other and from the background, moving apart.
SHAPES = (
    Shape(1, "disc", (220, 40, 40), (90.0, 96.0), (2.0, 0.5), 34),
    Shape(2, "box", (40, 90, 230), (230.0, 90.0), (-1.0, 1.0), 28),
)


@dataclass(frozen=True)
class Video:
    frames: list[np.ndarray]  # RGB uint8
    masks: list[dict[int, np.ndarray]]  # object ID -> bool mask per frame


def make_video(frame_count: int = 12, shapes: tuple[Shape, ...] = SHAPES) -> Video:
    random = np.random.default_rng(7)
    ys, xs = np.mgrid[:HEIGHT, :WIDTH]
    background = np.stack(
        [60 + 60 * xs / WIDTH, 120 + 40 * ys / HEIGHT, np.full(xs.shape, 90.0)], axis=-1
    )
    background += random.normal(0, 6, background.shape)
    texture = random.normal(0, 10, (HEIGHT, WIDTH, 3))
    frames, masks = [], []
    for index in range(frame_count):
        image = background.copy()
        frame_masks = {}
        for shape in shapes:
            x = shape.start[0] + shape.velocity[0] * index
            y = shape.start[1] + shape.velocity[1] * index
            if shape.kind == "disc":
                mask = (xs - x) ** 2 + (ys - y) ** 2 <= shape.size**2
            else:
                mask = (abs(xs - x) <= shape.size) & (abs(ys - y) <= shape.size)
            # The object's own texture moves with it.
            shifted = np.roll(texture, (round(y), round(x)), axis=(0, 1))
            image[mask] = np.array(shape.colour) + shifted[mask]
            frame_masks[shape.object_id] = mask
        frames.append(np.clip(image, 0, 255).astype(np.uint8))
        masks.append(frame_masks)
    return Video(frames, masks)


def write_mp4(video: Video, path: Path, *, fps: int = 24, gop: int = 5) -> Path:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.options = {"crf": "12", "g": str(gop), "bf": "2"}
        for image in video.frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def write_davis(video: Video, folder: Path, *, palette: bool = True) -> Path:
    """``folder/JPEGImages/00000.jpg`` ... and ``folder/Annotations/00000.png`` ..."""
    (folder / "JPEGImages").mkdir(parents=True)
    (folder / "Annotations").mkdir()
    for index, (image, masks) in enumerate(zip(video.frames, video.masks, strict=True)):
        cv2.imwrite(
            str(folder / "JPEGImages" / f"{index:05d}.jpg"),
            cv2.cvtColor(image, cv2.COLOR_RGB2BGR),
            [cv2.IMWRITE_JPEG_QUALITY, 95],
        )
        labels = np.zeros((HEIGHT, WIDTH), np.uint8)
        for object_id, mask in masks.items():
            labels[mask] = object_id if palette else 255
        annotation = Image.fromarray(labels, mode="P" if palette else "L")
        if palette:
            annotation.putpalette([0, 0, 0, 128, 0, 0, 0, 128, 0] + [0] * (253 * 3))
        annotation.save(folder / "Annotations" / f"{index:05d}.png")
    return folder
