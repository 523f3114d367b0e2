"""Clicks on one frame (segmentation/engines/classic/click_cut.py), on a drawn picture with known
shapes: two red discs and a blue square on a grainy grey floor."""

from __future__ import annotations

import cv2
import numpy as np

from segmentation.engines.classic.click_cut import REACH, Click, Terrain, cut_clicks

HEIGHT, WIDTH = 180, 320


def picture() -> tuple[np.ndarray, dict[str, np.ndarray]]:
    random = np.random.default_rng(7)
    image = np.clip(random.normal(128, 6, (HEIGHT, WIDTH, 3)), 0, 255).astype(np.uint8)
    shapes = {name: np.zeros((HEIGHT, WIDTH), np.uint8) for name in ("left", "right", "square")}
    cv2.circle(shapes["left"], (70, 90), 30, 1, -1)
    cv2.circle(shapes["right"], (250, 90), 30, 1, -1)
    cv2.rectangle(shapes["square"], (140, 60), (180, 120), 1, -1)
    for name, colour in (
        ("left", (200, 40, 40)),
        ("right", (200, 40, 40)),
        ("square", (40, 60, 200)),
    ):
        image[shapes[name].astype(bool)] = colour
    return image, {name: shape.astype(bool) for name, shape in shapes.items()}


def click(terrain: Terrain, clicks: list[Click], start: np.ndarray | None = None) -> np.ndarray:
    empty = np.zeros((HEIGHT, WIDTH), bool)
    mask = empty if start is None else start
    done = 0 if start is None else len(clicks) - 1
    return cut_clicks(terrain, clicks, start=mask, done=done)


def test_one_click_takes_the_disc_it_was_put_on_and_not_its_twin() -> None:
    image, shapes = picture()

    mask = click(Terrain(image), [Click(70, 90, True)])

    assert np.array_equal(mask, shapes["left"])


def test_a_positive_click_on_the_twin_adds_it_within_reach_and_keeps_the_first() -> None:
    image, shapes = picture()
    terrain = Terrain(image)
    first = click(terrain, [Click(70, 90, True)])

    both = click(terrain, [Click(70, 90, True), Click(250, 90, True)], start=first)

    # then nothing the first click got is lost, and the twin is added as far as a click reaches
    # (half the object's size around it: a weak edge must not let one click flood the frame)
    assert np.array_equal(both & first, first)
    reach = REACH * np.sqrt(np.count_nonzero(first))
    rows, columns = np.ogrid[:HEIGHT, :WIDTH]
    within = (columns - 250) ** 2 + (rows - 90) ** 2 <= reach**2
    assert np.array_equal(both, first | (shapes["right"] & within))


def test_a_negative_click_removes_only_the_part_it_was_put_on() -> None:
    # given a mask holding the left disc and, wrongly, the square
    image, shapes = picture()
    wrong = shapes["left"] | shapes["square"]

    mask = click(Terrain(image), [Click(70, 90, True), Click(160, 90, False)], start=wrong)

    assert np.array_equal(mask, shapes["left"])


def test_the_same_clicks_give_the_same_mask() -> None:
    image, _ = picture()
    clicks = [Click(70, 90, True), Click(160, 90, False), Click(250, 90, True)]

    first, second = click(Terrain(image), clicks), click(Terrain(image.copy()), list(clicks))

    assert np.array_equal(first, second)
    assert first.any()
