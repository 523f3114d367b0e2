"""The two rules of a correction (segmentation/engines/base.py), as properties of the classic
engine on generated video where the right answer is known (hypothesis, derandomized so that a
run is repeatable):

- a click on a frame that has a mask changes that mask only around the click, in the way asked,
  and never throws away most of a mask that was mostly right;
- a propagation from a corrected frame changes the frames that the correction governs (those
  nearer it than any other anchor of the object) and no others.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from segmentation.engines.base import VideoState
from segmentation.engines.classic import ClassicEngine
from segmentation.evaluation.clicks import Click, first_click, next_click
from segmentation.evaluation.metrics import region_similarity
from tests.segmentation.synthetic import HEIGHT, WIDTH, Video

EXAMPLES = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
# Rectangles (left, top, width, height) about object 1 of the synthetic video, a disc of radius
# 34 at x 90, y 96 on frame 0: most of them overlap it or touch it.
NEAR_THE_DISC = st.tuples(
    st.integers(20, 150), st.integers(20, 140), st.integers(12, 90), st.integers(12, 90)
)


def rectangle(left: int, top: int, width: int, height: int) -> np.ndarray:
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[top : top + height, left : left + width] = True
    return mask


def add_click(state: VideoState, frame_index: int, object_id: int, click: Click):
    return state.add_points(
        frame_index=frame_index,
        object_id=object_id,
        points=[[click.x / (WIDTH - 1), click.y / (HEIGHT - 1)]],
        labels=[int(click.positive)],
        clear_old_points=False,
    )[object_id]


@EXAMPLES
@given(extra=NEAR_THE_DISC)
def test_a_negative_click_takes_away_only_what_it_denies(frames, video: Video, extra) -> None:
    # given object 1's mask with a wrongly covered part beside or across it
    truth = video.masks[0][1]
    wrong = rectangle(*extra) & ~truth & ~video.masks[0][2]
    assume(np.count_nonzero(wrong) >= 150)
    state = ClassicEngine().open(frames)
    state.add_mask(frame_index=0, object_id=1, mask=truth | wrong)
    click = next_click(truth | wrong, truth)
    assert click is not None
    assert not click.positive

    mask = add_click(state, 0, 1, click)

    # then the clicked place is gone, the mask is no worse, and the object is kept
    assert not mask[click.y, click.x]
    assert region_similarity(mask, truth) >= region_similarity(truth | wrong, truth)
    assert np.count_nonzero(mask & truth) >= 0.97 * np.count_nonzero(truth)


@EXAMPLES
@given(bite=NEAR_THE_DISC)
def test_a_positive_click_adds_only_the_part_around_it(frames, video: Video, bite) -> None:
    # given object 1's mask with a part of it missing
    truth = video.masks[0][1]
    missed = rectangle(*bite) & truth
    assume(np.count_nonzero(missed) >= 150)
    state = ClassicEngine().open(frames)
    state.add_mask(frame_index=0, object_id=1, mask=truth & ~missed)
    click = next_click(truth & ~missed, truth)
    assert click is not None
    assert click.positive

    mask = add_click(state, 0, 1, click)

    # then the clicked place is in, the mask is no worse, and little outside the object came
    assert mask[click.y, click.x]
    assert region_similarity(mask, truth) >= region_similarity(truth & ~missed, truth)
    assert np.count_nonzero(mask & ~truth) <= 0.03 * np.count_nonzero(truth)


def nearest(anchors: set[int], frame_index: int) -> int:
    return min(anchors, key=lambda index: (abs(index - frame_index), index))


@EXAMPLES
@given(
    anchors=st.sets(st.integers(0, 11), min_size=1, max_size=3),
    corrected=st.integers(0, 11),
    start=st.integers(0, 11),
)
def test_a_propagation_from_a_corrected_frame_changes_only_the_frames_it_governs(
    frames, video: Video, anchors: set[int], corrected: int, start: int
) -> None:
    # given object 1's true mask on some frames, object 2 clicked on frame 0, and every frame
    # propagated from a random frame
    state = ClassicEngine().open(frames)
    for index in sorted(anchors):
        state.add_mask(frame_index=index, object_id=1, mask=video.masks[index][1])
    add_click(state, 0, 2, first_click(video.masks[0][2]))
    before = dict(state.propagate(start_frame_index=start))

    # when a frame is corrected to hold nothing of object 1, and propagated from there
    state.add_mask(frame_index=corrected, object_id=1, mask=np.zeros((HEIGHT, WIDTH), bool))
    after = dict(state.propagate(start_frame_index=corrected))

    # then the frames nearer the corrected frame than any other anchor (the earlier of two as
    # near) take what it carries, nothing; every other frame, and object 2, keep their masks
    governed = {i for i in range(12) if nearest(anchors | {corrected}, i) == corrected}
    assert sorted(after) == list(range(12))
    for index in range(12):
        if index in governed:
            assert not after[index][1].any(), index
        else:
            np.testing.assert_array_equal(after[index][1], before[index][1], err_msg=str(index))
            assert region_similarity(after[index][1], video.masks[index][1]) > 0.85, index
        np.testing.assert_array_equal(after[index][2], before[index][2], err_msg=str(index))


def test_frames_between_two_anchors_take_the_nearer_one(frames, video: Video) -> None:
    # given object 1 on frame 0 from a click, propagated, then corrected on frame 9
    state = ClassicEngine().open(frames)
    add_click(state, 0, 1, first_click(video.masks[0][1]))
    before = dict(state.propagate(start_frame_index=0))
    state.add_mask(frame_index=9, object_id=1, mask=np.zeros((HEIGHT, WIDTH), bool))

    # when propagated from frame 9, and then again from frame 0
    from_nine = dict(state.propagate(start_frame_index=9))
    from_zero = dict(state.propagate(start_frame_index=0))

    # then frames 0 to 4 keep frame 0's masks and 5 to 11 are frame 9's (empty), whichever
    # frame the propagation starts from
    for steps in (from_nine, from_zero):
        for index in range(5):
            np.testing.assert_array_equal(steps[index][1], before[index][1])
        assert not any(steps[index][1].any() for index in range(5, 12))


@pytest.mark.parametrize("count", [1, 2])
def test_a_propagation_with_nothing_changed_changes_nothing(frames, video: Video, count) -> None:
    state = ClassicEngine().open(frames)
    add_click(state, 0, 1, first_click(video.masks[0][1]))
    first = dict(state.propagate(start_frame_index=0))

    for _ in range(count):
        again = dict(state.propagate(start_frame_index=6))

    for index in range(12):
        np.testing.assert_array_equal(again[index][1], first[index][1])


def test_a_negative_click_on_a_mask_mostly_wrong_keeps_the_object(frames, video: Video) -> None:
    # given object 1 (a disc of radius 34 at x 90, y 96) with three times its size of
    # background beside it in its mask, as propagation leaves it after losing the object's edge
    # (the case: 51,936 pixels where the object has 25,015)
    truth = video.masks[0][1]
    wrong = rectangle(120, 20, 110, 150) & ~truth & ~video.masks[0][2]
    state = ClassicEngine().open(frames)
    state.add_mask(frame_index=0, object_id=1, mask=truth | wrong)
    click = next_click(truth | wrong, truth)

    mask = add_click(state, 0, 1, click)

    # then the negative click at the middle of the wrong part takes away a part of it and not
    # the whole object, as it did (1 pixel of the object's 3,625 was left; the engine
    # answered 72 pixels). The mask was mostly wrong, so the click may cost some of the object
    # (today 2,068 of its pixels), and the next ones bring it back.
    assert np.count_nonzero(wrong) > 2 * np.count_nonzero(truth)
    assert not click.positive
    assert np.count_nonzero(mask & truth) >= 0.4 * np.count_nonzero(truth)
    assert np.count_nonzero(mask & wrong) < 0.8 * np.count_nonzero(wrong)
