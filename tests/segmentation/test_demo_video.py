"""The drawn default video's objects, as the benchmark on it sees them."""

from __future__ import annotations

import numpy as np

from segmentation.demo_video import HEIGHT, WIDTH, demo_masks


def test_the_masks_are_where_the_objects_are_seen() -> None:
    first, crossing = demo_masks(0), demo_masks(52)

    # frame 0: the ball and the box apart, the star not yet in
    assert {name: int(np.count_nonzero(mask)) for name, mask in first.items()} == {
        "ball": 10789,
        "box": 12813,
        "star": 0,
    }
    assert first["ball"].shape == (HEIGHT, WIDTH)
    assert not (first["ball"] & first["box"]).any()
    # frame 52: the star and the box pass in front of the ball, which loses what they hide
    assert {name: int(np.count_nonzero(mask)) for name, mask in crossing.items()} == {
        "ball": 5995,
        "box": 12882,
        "star": 5001,
    }
    assert not (crossing["ball"] & (crossing["box"] | crossing["star"])).any()
