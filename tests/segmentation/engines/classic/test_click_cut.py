"""Clicks on one frame (segmentation/engines/classic/click_cut.py), on a drawn picture with known
shapes: two red discs and a blue square on a grainy grey floor."""

from __future__ import annotations

import cv2
import numpy as np

from segmentation.engines.classic.click_cut import (
    REACH,
    Box,
    Click,
    Terrain,
    cut_box,
    cut_clicks,
)

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


def boxed_picture() -> tuple[np.ndarray, np.ndarray]:
    """A red rectangle on a textured floor: blotches of every colour, with grain."""
    random = np.random.default_rng(3)
    blotches = random.integers(0, 256, (9, 16, 3)).astype(np.uint8)
    floor = cv2.resize(blotches, (WIDTH, HEIGHT), interpolation=cv2.INTER_CUBIC)
    image = np.clip(floor + random.normal(0, 12, (HEIGHT, WIDTH, 3)), 0, 255).astype(np.uint8)
    rectangle = np.zeros((HEIGHT, WIDTH), bool)
    rectangle[50:130, 110:210] = True
    image[rectangle] = (220, 30, 30)
    return image, rectangle


def test_a_box_alone_cuts_the_rectangle_in_it() -> None:
    image, rectangle = boxed_picture()

    # a box 20 pixels loose on every side: 53% of it is floor
    mask = cut_box(Terrain(image), Box(90, 30, 229, 149))

    # measured 0.9991 (the cut takes 7 floor pixels with it)
    assert np.count_nonzero(mask & rectangle) / np.count_nonzero(mask | rectangle) >= 0.999


def test_a_box_takes_the_disc_in_it_and_a_click_outside_it_adds_nothing() -> None:
    image, shapes = picture()
    terrain = Terrain(image)
    box = Box(30, 50, 110, 130)  # the left disc, 10 pixels loose

    start = cut_box(terrain, box)
    mask = cut_clicks(terrain, [Click(250, 90, True)], start=start, box=box)

    assert np.array_equal(start, shapes["left"])
    assert np.array_equal(mask, start)


def test_a_negative_click_in_the_box_takes_out_what_it_is_on() -> None:
    image, shapes = picture()
    terrain = Terrain(image)
    box = Box(30, 50, 190, 130)  # the left disc and the blue square

    start = cut_box(terrain, box)
    mask = cut_clicks(terrain, [Click(160, 90, False)], start=start, box=box)

    assert np.array_equal(start, shapes["left"] | shapes["square"])
    assert np.array_equal(mask, shapes["left"])
