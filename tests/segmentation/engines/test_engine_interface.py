"""What every engine shares: input checks, option parsing and choosing an engine by name."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from segmentation.apps import SegmentationConfig
from segmentation.engines import engine_class, engine_create, engine_options
from segmentation.engines.base import EngineConfigError, Masks, PromptError, VideoState
from segmentation.engines.classic import ClassicEngine, ClassicOptions
from segmentation.engines.sam2.engine import Sam2Engine

LABELS = "labels must be 1 (positive), 0 (negative), 2 (box top-left) or 3 (box bottom-right)"
PAIRING = (
    "a box is a point labelled 2 (top-left) followed by one labelled 3 (bottom-right), "
    "before any clicks"
)
AREA = (
    "a box's top-left corner (label 2) must be above and left of its bottom-right corner "
    "(label 3), with an area"
)
OUTSIDE = "a box must lie inside the frame (corners normalized to [0, 1])"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"points": [[1.2, 0.5]]}, "point coordinates must be normalized to [0, 1]"),
        ({"points": [[0.5, -0.01]]}, "point coordinates must be normalized to [0, 1]"),
        ({"points": [[float("nan"), 0.5]]}, "point coordinates must be normalized to [0, 1]"),
        (
            {"points": [[0.5, 0.5], [0.2, 0.2]]},
            "points and labels differ in length: 2 points, 1 labels",
        ),
        ({"labels": [1, 0]}, "points and labels differ in length: 1 points, 2 labels"),
        ({"labels": [4]}, LABELS),
        ({"labels": [-1]}, LABELS),
        ({"labels": [True]}, LABELS),
        ({"labels": [2]}, PAIRING),
        ({"labels": [3]}, PAIRING),
        ({"points": [[0.1, 0.1], [0.6, 0.6]], "labels": [3, 2]}, PAIRING),
        ({"points": [[0.5, 0.5], [0.1, 0.1], [0.6, 0.6]], "labels": [1, 2, 3]}, PAIRING),
        ({"points": [[0.1, 0.1], [0.5, 0.5], [0.6, 0.6]], "labels": [2, 1, 3]}, PAIRING),
        (
            {"points": [[0.1, 0.1], [0.6, 0.6], [0.2, 0.2], [0.7, 0.7]], "labels": [2, 3, 2, 3]},
            "at most one box (one point labelled 2 and one labelled 3)",
        ),
        ({"points": [[0.2, 0.1], [0.2, 0.6]], "labels": [2, 3]}, AREA),
        ({"points": [[0.1, 0.4], [0.6, 0.4]], "labels": [2, 3]}, AREA),
        ({"points": [[0.6, 0.6], [0.1, 0.1]], "labels": [2, 3]}, AREA),
        ({"points": [[0.1, 0.6], [0.6, 0.1]], "labels": [2, 3]}, AREA),
        ({"points": [[-0.1, 0.1], [0.6, 0.6]], "labels": [2, 3]}, OUTSIDE),
        ({"points": [[0.1, 0.1], [0.6, 1.2]], "labels": [2, 3]}, OUTSIDE),
        ({"points": [[0.1, 0.1], [0.6, float("inf")]], "labels": [2, 3]}, OUTSIDE),
        ({"points": [], "labels": []}, "at least one point is needed"),
        ({"points": [[0.5]]}, "points must be a list of [x, y] pairs of numbers"),
        ({"points": [["a", "b"]]}, "points must be a list of [x, y] pairs of numbers"),
        ({"points": [[0.1, 0.2], [0.3]]}, "points must be a list of [x, y] pairs of numbers"),
        ({"frame_index": 12}, "frame index 12 is outside the video's frames 0..11"),
        ({"frame_index": -1}, "frame index -1 is outside the video's frames 0..11"),
        ({"frame_index": 1.5}, "frame index must be an integer, got 1.5"),
        ({"object_id": -3}, "object ID must not be negative, got -3"),
        ({"object_id": "1"}, "object ID must be an integer, got '1'"),
        (
            {"points": [[0.5, 0.5]] * 101, "labels": [1] * 101},
            "at most 100 points per object and frame, got 101",
        ),
    ],
)
def test_bad_prompts_are_refused_and_change_nothing(
    state: VideoState, kwargs: dict, message: str
) -> None:
    prompt = {"frame_index": 0, "object_id": 1, "points": [[0.5, 0.5]], "labels": [1]} | kwargs

    with pytest.raises(PromptError) as raised:
        state.add_points(**prompt)

    assert str(raised.value) == message
    assert state.prompts == {}
    assert state.object_ids == []


def test_points_added_to_old_ones_are_capped_too(state: VideoState) -> None:
    state.add_points(frame_index=0, object_id=1, points=[[0.5, 0.5]] * 60, labels=[1] * 60)
    before = state.prompts[1][0]

    with pytest.raises(PromptError) as raised:
        state.add_points(
            frame_index=0,
            object_id=1,
            points=[[0.2, 0.2]] * 41,
            labels=[0] * 41,
            clear_old_points=False,
        )

    assert str(raised.value) == "at most 100 points per object and frame, got 101"
    assert state.prompts[1][0] is before


def test_a_box_must_replace_the_old_points(state: VideoState) -> None:
    # as in SAM 2's predictor: a box comes before every click, so it cannot be added to them
    state.add_points(frame_index=0, object_id=1, points=[[0.5, 0.5]], labels=[1])
    before = state.prompts[1][0]

    with pytest.raises(PromptError) as raised:
        state.add_points(
            frame_index=0,
            object_id=1,
            points=[[0.1, 0.1], [0.9, 0.9]],
            labels=[2, 3],
            clear_old_points=False,
        )

    assert str(raised.value) == "a box replaces the object's points on the frame: clear old points"
    assert state.prompts[1][0] is before


def test_a_box_comes_first_and_clicks_added_later_follow_it(state: VideoState) -> None:
    state.add_points(frame_index=0, object_id=1, points=[[0.0, 0.25], [1.0, 0.75]], labels=[2, 3])
    state.add_points(
        frame_index=0, object_id=1, points=[[0.5, 0.5]], labels=[0], clear_old_points=False
    )

    prompt = state.prompts[1][0]
    width, height = state.frames.width - 1, state.frames.height - 1
    assert prompt.labels.tolist() == [2, 3, 0]
    assert prompt.box.tolist() == [[0.0, 0.25 * height], [width, 0.75 * height]]
    assert [part.tolist() for part in prompt.clicks] == [[[0.5 * width, 0.5 * height]], [0]]


def test_other_operations_check_their_input(state: VideoState) -> None:
    with pytest.raises(PromptError, match=r"^frame index 40 is outside"):
        state.clear_points_in_frame(frame_index=40, object_id=1)
    with pytest.raises(PromptError, match=r"^object ID must not be negative"):
        state.remove_object(object_id=-1)
    with pytest.raises(PromptError, match=r"^frame index 12 is outside"):
        next(state.propagate(start_frame_index=12))


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (
            np.zeros((192, 319), bool),
            "the mask must be 192x320 (the video's height x width), got 192x319",
        ),
        (
            np.zeros((192, 320, 1), bool),
            "the mask must be 192x320 (the video's height x width), got 192x320x1",
        ),
        (np.full((192, 320), 2, np.uint8), "the mask must hold booleans or 0 and 1"),
        (np.full((192, 320), 0.5), "the mask must hold booleans or 0 and 1"),
        (np.full((192, 320), "1"), "the mask must hold booleans or 0 and 1"),
    ],
)
def test_bad_masks_are_refused_and_change_nothing(
    state: VideoState, mask: np.ndarray, message: str
) -> None:
    with pytest.raises(PromptError) as raised:
        state.add_mask(frame_index=0, object_id=1, mask=mask)

    assert str(raised.value) == message
    assert state.object_ids == []
    assert state.masks(frame_index=0) == {}


def test_a_mask_replaces_the_objects_clicks_on_its_frame(state: VideoState) -> None:
    state.add_points(frame_index=2, object_id=4, points=[[0.5, 0.5]], labels=[1])
    state.add_points(frame_index=3, object_id=4, points=[[0.5, 0.5]], labels=[1])
    given = np.zeros((192, 320), np.uint8)
    given[50:90, 100:180] = 1

    masks = state.add_mask(frame_index=2, object_id=4, mask=given)

    assert list(state.prompts[4]) == [3]
    assert state.object_ids == [4]
    assert list(masks) == [4]


def test_points_are_kept_in_pixels(state: VideoState) -> None:
    state.add_points(frame_index=3, object_id=7, points=[[0.0, 1.0], [1.0, 0.5]], labels=[1, 0])

    prompt = state.prompts[7][3]
    assert prompt.points.tolist() == [[0.0, 191.0], [319.0, 95.5]]
    assert prompt.labels.tolist() == [1, 0]
    assert state.object_ids == [7]


def test_options_parse_from_strings() -> None:
    options = ClassicOptions.parse({"work_size": "320", "flow_preset": "medium", "band": "0.05"})

    assert options == ClassicOptions(work_size=320, flow_preset="medium", band=0.05)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"work_size": "big"}, "option 'work_size' must be an integer, got 'big'"),
        ({"band": "inf"}, "option 'band' must be a number, got 'inf'"),
        ({"work_size": "32"}, "work_size must be within 64..4096, got 32"),
        ({"flow_preset": "slow"}, "flow_preset must be one of ultrafast, fast, medium, got 'slow'"),
        (
            {"colour": "red"},
            "unknown option 'colour' (known options: band, click_iterations, click_radius, "
            "edge_colours, flow_preset, work_size)",
        ),
    ],
)
def test_bad_options_are_clear_errors(raw: dict[str, str], message: str) -> None:
    with pytest.raises(EngineConfigError) as raised:
        engine_options("classic", raw)

    assert str(raised.value) == message


def test_engines_are_chosen_by_name() -> None:
    engine = engine_create("classic", {"work_size": "256"})

    assert engine_class("classic") is ClassicEngine
    assert isinstance(engine, ClassicEngine)
    assert engine.options.work_size == 256
    assert engine_class("sam2") is Sam2Engine
    with pytest.raises(EngineConfigError) as raised:
        engine_class("magic")
    assert str(raised.value) == "unknown engine 'magic' (engines: classic, sam2)"


@override_settings(SEGMENTATION_ENGINE="classic", SEGMENTATION_ENGINE_OPTIONS={"band": "2"})
def test_bad_engine_setting_stops_start_up() -> None:
    import segmentation

    with pytest.raises(ImproperlyConfigured) as raised:
        SegmentationConfig("segmentation", segmentation).ready()

    assert str(raised.value) == (
        "SEGMENTATION_ENGINE='classic' (options from SEGMENTATION_ENGINE_OPTIONS): "
        "band must be within (0, 0.5], got 2.0"
    )


class FinishingLaterState(VideoState):
    """A state whose masks come back as futures, finished after the next frame has started."""

    def __init__(self, frames, log: list[str]) -> None:
        super().__init__(frames)
        self.log = log

    def _start_pass(self, frame_index: int) -> None:
        self.log.append(f"pass from {frame_index}")

    def _track(self, frame_index: int, *, reverse: bool) -> Future[Masks]:
        self.log.append(f"track {frame_index}")
        finished: Future[Masks] = Future()
        finished.set_result({1: np.full((2, 2), frame_index % 2 == 1)})
        return finished

    _segment = _masked = _masks = _cleared = _reset = _removed = None  # not called here


def test_masks_finished_later_are_yielded_once_the_next_frame_has_started(frames) -> None:
    log: list[str] = []
    state = FinishingLaterState(frames, log)

    for frame_index, masks in state.propagate(start_frame_index=10):
        log.append(f"yield {frame_index} {int(masks[1].sum())}")

    assert log == [
        "pass from 10",
        "track 10",
        "track 11",
        "yield 10 0",
        "pass from 10",
        "track 9",
        "yield 11 4",
        *["track 8", "yield 9 4", "track 7", "yield 8 0", "track 6", "yield 7 4"],
        *["track 5", "yield 6 0", "track 4", "yield 5 4", "track 3", "yield 4 0"],
        *["track 2", "yield 3 4", "track 1", "yield 2 0", "track 0", "yield 1 4"],
        "yield 0 0",
    ]


def test_a_cancelled_propagation_yields_nothing_more(frames) -> None:
    log: list[str] = []
    state = FinishingLaterState(frames, log)
    cancel = threading.Event()

    for frame_index, _ in state.propagate(start_frame_index=3, cancel=cancel):
        log.append(f"yield {frame_index}")
        cancel.set()

    assert log == ["pass from 3", "track 3", "track 4", "yield 3"]
