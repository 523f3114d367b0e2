"""The default video of a fresh machine, drawn here: three objects moving over a textured floor.

A gallery needs a video before anyone uploads one, and no video may be downloaded at set-up. The
scene gives the engine something worth segmenting: objects of distinct colours and textures that
move, turn and pass near each other.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

WIDTH, HEIGHT, FPS, SECONDS = 854, 480, 24, 6


def demo_video_write(destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    random = np.random.default_rng(2024)
    floor = _floor(random)
    partial = destination.with_name(f".{destination.name}.partial")
    with av.open(str(partial), "w", format="mp4", options={"movflags": "faststart"}) as output:
        stream = output.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.options = {"crf": "20", "preset": "veryfast", "g": str(FPS)}
        for index in range(FPS * SECONDS):
            frame = av.VideoFrame.from_ndarray(_scene(floor, index / (FPS * SECONDS)), "rgb24")
            frame.pts, frame.time_base = index, Fraction(1, FPS)
            for packet in stream.encode(frame):
                output.mux(packet)
        for packet in stream.encode():
            output.mux(packet)
    partial.replace(destination)


def _floor(random: np.random.Generator) -> np.ndarray:
    ys, xs = np.mgrid[:HEIGHT, :WIDTH].astype(np.float32)
    tiles = ((xs // 64 + ys // 64) % 2) * 18
    base = np.stack([120 + tiles, 130 + tiles + 40 * ys / HEIGHT, 110 + 30 * xs / WIDTH], axis=-1)
    grain = cv2.GaussianBlur(random.normal(0, 14, (HEIGHT, WIDTH, 3)).astype(np.float32), (5, 5), 0)
    return np.clip(base + grain, 0, 255).astype(np.uint8)


def demo_masks(index: int) -> dict[str, np.ndarray]:
    """Where each drawn object is seen on frame ``index`` (what one click on it should find):
    ``ball``, ``box`` and ``star``, each without the parts the objects drawn later hide."""
    t = index / (FPS * SECONDS)
    layers = {}
    for name, draw in (("ball", _draw_ball), ("box", _draw_box), ("star", _draw_star)):
        layer = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
        draw(layer, t, solid=True)
        layers[name] = layer[..., 0] > 127
    return {
        "ball": layers["ball"] & ~layers["box"] & ~layers["star"],
        "box": layers["box"] & ~layers["star"],
        "star": layers["star"],
    }


def _scene(floor: np.ndarray, t: float) -> np.ndarray:
    """The frame at ``t`` in [0, 1) of the loop."""
    image = floor.copy()
    for draw in (_draw_ball, _draw_box, _draw_star):
        draw(image, t)
    return image


def _draw_ball(image: np.ndarray, t: float, *, solid: bool = False) -> None:
    """A red ball rolling along an ellipse (``solid``: the ball alone, in white)."""
    angle = 2 * np.pi * t
    centre = (int(WIDTH / 2 + 260 * np.cos(angle)), int(HEIGHT / 2 + 120 * np.sin(angle)))
    if solid:
        cv2.circle(image, centre, 58, (255, 255, 255), -1, cv2.LINE_AA)
        return
    cv2.circle(image, (centre[0] + 6, centre[1] + 10), 58, (70, 80, 70), -1, cv2.LINE_AA)
    cv2.circle(image, centre, 58, (205, 45, 40), -1, cv2.LINE_AA)
    cv2.circle(image, (centre[0] - 18, centre[1] - 20), 16, (245, 150, 140), -1, cv2.LINE_AA)


def _draw_box(image: np.ndarray, t: float, *, solid: bool = False) -> None:
    """A blue box with a white rim, turning in place."""
    angle = 2 * np.pi * t
    box = cv2.boxPoints(((WIDTH * 0.3, HEIGHT * 0.45), (130, 90), np.degrees(angle) * 0.5))
    fill, rim = ((255, 255, 255),) * 2 if solid else ((40, 80, 190), (230, 230, 240))
    cv2.fillPoly(image, [box.astype(np.int32)], fill, cv2.LINE_AA)
    cv2.polylines(image, [box.astype(np.int32)], True, rim, 4, cv2.LINE_AA)


def _draw_star(image: np.ndarray, t: float, *, solid: bool = False) -> None:
    """A yellow star crossing the frame."""
    angle = 2 * np.pi * t
    star_x = int(-80 + (WIDTH + 160) * t)
    points = []
    for k in range(10):
        radius = 62 if k % 2 == 0 else 26
        a = angle * 2 + k * np.pi / 5
        points.append((star_x + radius * np.cos(a), HEIGHT * 0.72 + radius * np.sin(a)))
    colour = (255, 255, 255) if solid else (235, 200, 40)
    cv2.fillPoly(image, [np.array(points, np.int32)], colour, cv2.LINE_AA)
