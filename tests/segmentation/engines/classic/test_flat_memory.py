"""The weight-free engine with a store beside it (``VideoState.recall``): memory flat at any
length, results as without it, and anchors given back to a new state (``VideoState.restore``)."""

from __future__ import annotations

import numpy as np
import pytest

from segmentation.engines.base import Masks, PromptError
from segmentation.engines.classic import ClassicEngine
from segmentation.engines.classic.engine import ClassicVideoState
from segmentation.engines.footprint import held_bytes
from tests.segmentation.engines.drawn import HEIGHT, WIDTH, DrawnFrames, Store


def opened(frames: DrawnFrames, store: Store | None, kept: int | None = None) -> ClassicVideoState:
    state = ClassicEngine().open(frames)
    if store is not None:
        state.recall = store.recall
    if kept is not None:
        state.results_kept = kept
    return state


def clicked(state: ClassicVideoState, frames: DrawnFrames, frame_index: int) -> Masks:
    point = frames.point(frame_index)
    return state.add_points(frame_index=frame_index, object_id=1, points=[point], labels=[1])


def same(first: Masks, second: Masks) -> bool:
    return list(first) == list(second) and all(
        np.array_equal(mask, second[k]) for k, mask in first.items()
    )


def test_with_a_store_a_propagation_tracks_as_without_it_in_flat_memory() -> None:
    # given a video four times longer than the results a state keeps with a store (256 by
    # default; 32 here, which lets go of results as 256 does, on an eighth of the frames)
    frames = DrawnFrames(128)
    store = Store()
    assert opened(frames, store).results_kept == 256
    flat, full = opened(frames, store, kept=32), opened(frames, None)
    store.keep(0, clicked(flat, frames, 0))
    clicked(full, frames, 0)
    held: dict[tuple[str, int], int] = {}

    # when both propagate forward through it
    yielded = {}
    for (index, masks), (_, plain) in zip(
        flat.propagate(start_frame_index=0), full.propagate(start_frame_index=0), strict=True
    ):
        yielded[index] = store.keep(index, masks)
        assert same(masks, plain), index
        if index in (64, 127):
            held["flat", index], held["full", index] = held_bytes(flat), held_bytes(full)

    # then the state with the store holds as much at frame 127 as at frame 64 (a result is a
    # packed 96 x 64 mask: 768 bytes), and the one without it a result a frame more
    assert sorted(yielded) == list(range(128))
    assert held["flat", 127] == held["flat", 64]
    assert held["full", 127] - held["full", 64] == 63 * 768
    assert len(flat._results[1]) == 32
    # and every frame's masks are those it yielded, the evicted ones recalled
    assert all(same(flat.masks(frame_index=i), yielded[i]) for i in range(128))


def test_evicted_results_are_recalled_both_ways_and_the_serials_stay_current() -> None:
    # given a click in the middle of a video, a state keeping 16 results, and one keeping all
    frames = DrawnFrames(120)
    store = Store()
    flat, full = opened(frames, store, kept=16), opened(frames, None)
    store.keep(60, clicked(flat, frames, 60))
    clicked(full, frames, 60)

    # when both propagate forward then backward, and again (every frame already current)
    first = {i: store.keep(i, m) for i, m in flat.propagate(start_frame_index=60)}
    plain = dict(full.propagate(start_frame_index=60))
    again = dict(flat.propagate(start_frame_index=60))

    # then the results are the same, the second pass recalled rather than recomputed
    assert sorted(first) == list(range(120))
    assert all(same(first[i], plain[i]) for i in range(120))
    assert all(same(again[i], first[i]) for i in range(120))
    assert len(flat._results[1]) == 16


def test_a_click_on_a_frame_whose_result_is_kept_corrects_it_as_without_a_store() -> None:
    # given a state whose window covers the video, and one without a store
    frames = DrawnFrames(60)
    store = Store()
    flat, full = opened(frames, store, kept=60), opened(frames, None)
    store.keep(0, clicked(flat, frames, 0))
    clicked(full, frames, 0)
    for (index, masks), _ in zip(flat.propagate(), full.propagate(), strict=True):
        store.keep(index, masks)

    # when each is corrected on frame 40 (a negative click on the disc's right edge)
    x, y = frames.point(40)
    edge = [x + 12 / (WIDTH - 1), y]
    kwargs = {"frame_index": 40, "object_id": 1, "points": [edge], "labels": [0]}

    # then the corrections are the same
    assert same(flat.add_points(**kwargs), full.add_points(**kwargs))


def test_a_click_on_an_evicted_frame_corrects_the_recalled_mask() -> None:
    # given a state that kept only the last 8 of 60 results, and one that kept all
    frames = DrawnFrames(60)
    store = Store()
    flat, full = opened(frames, store, kept=8), opened(frames, None)
    store.keep(0, clicked(flat, frames, 0))
    clicked(full, frames, 0)
    for (index, masks), _ in zip(flat.propagate(), full.propagate(), strict=True):
        store.keep(index, masks)
    assert 20 not in flat._results[1]

    # when each is corrected on frame 20 by a negative click on the disc's right edge
    x, y = frames.point(20)
    edge = [x + 12 / (WIDTH - 1), y]
    kwargs = {"frame_index": 20, "object_id": 1, "points": [edge], "labels": [0]}
    recalled, kept = flat.add_points(**kwargs)[1], full.add_points(**kwargs)[1]

    # then both cut the same region off a mask that was there (the recalled one differs from
    # the kept working result only by the output's smoothing): they agree on all but a few
    # pixels of the disc's edge, and keep its centre
    shown = store.frames[20][1]
    assert recalled.sum() < shown.sum()
    assert np.count_nonzero(recalled != kept) <= 0.02 * kept.sum()
    assert recalled[round(y * (HEIGHT - 1)), round(x * (WIDTH - 1))]


def test_a_restored_mask_is_shown_as_given_and_anchors_as_the_original() -> None:
    # given a state where a mask was given on frame 10 and propagated
    frames = DrawnFrames(40)
    given = frames.mask(10)
    original = opened(frames, None)
    original.give_mask(frame_index=10, object_id=1, mask=given)
    before = dict(original.propagate(start_frame_index=10))

    # when a new state is given that anchor back
    restored = opened(frames, Store())
    restored.restore(object_id=1, frame_index=10, prompt=None, mask=given)

    # then the frame shows the mask at once, as given, with no prompt (as give_mask leaves it)
    assert same(restored.masks(frame_index=10), {1: given})
    assert restored.object_ids == [1]
    assert restored.prompts == {}
    # and a propagation from it gives the original's masks on every other frame
    after = dict(restored.propagate(start_frame_index=10))
    assert sorted(after) == sorted(before) == list(range(40))
    assert all(same(after[i], before[i]) for i in range(40) if i != 10)
    assert same(after[10], {1: given})


def test_restored_clicks_are_extended_as_the_original_s() -> None:
    # given a click on frame 10, and its anchor as a store keeps it: the clicks, and the mask
    # (the video is smaller than the working size, so the working mask is the video's)
    frames = DrawnFrames(30)
    original = opened(frames, None)
    clicked(original, frames, 10)
    prompt = original.prompts[1][10]
    mask = original._anchors[1][10].mask

    # when a new state is given it back
    restored = opened(frames, Store())
    restored.restore(object_id=1, frame_index=10, prompt=prompt, mask=mask)

    # then the frame shows the mask at once and holds the clicks
    assert same(restored.masks(frame_index=10), {1: mask})
    assert restored.prompts[1][10] == prompt
    # and a click added to them applies only the new one, as on the original
    x, y = frames.point(10)
    kwargs = {
        "frame_index": 10,
        "object_id": 1,
        "points": [[x + 12 / (WIDTH - 1), y]],
        "labels": [0],
        "clear_old_points": False,
    }
    assert same(restored.add_points(**kwargs), original.add_points(**kwargs))
    # and propagations from the two are the same
    after, before = dict(restored.propagate()), dict(original.propagate())
    assert all(same(after[i], before[i]) for i in range(30))


def test_a_restored_anchor_is_checked_as_a_given_mask_is() -> None:
    state = opened(DrawnFrames(5), None)

    with pytest.raises(PromptError) as error:
        state.restore(object_id=1, frame_index=2, prompt=None, mask=np.zeros((4, 4), bool))

    assert str(error.value) == "the mask must be 64x96 (the video's height x width), got 4x4"
    assert state.object_ids == []


def test_results_carried_back_from_an_anchor_ahead_are_kept_until_the_pass_shows_them() -> None:
    # given anchors on the first and the last of 96 frames, and a state keeping 16 results
    frames = DrawnFrames(96)
    store = Store()
    flat, full = opened(frames, store, kept=16), opened(frames, None)
    for state in (flat, full):
        for frame_index in (0, 95):
            masks = clicked(state, frames, frame_index)
            if state is flat:
                store.keep(frame_index, masks)

    # when both propagate forward from the first: past frame 48 each frame's mask is carried
    # back from frame 95 (three times the results kept), in one sweep that reaches the pass's
    # frame before the pass does
    for (index, masks), (_, plain) in zip(
        flat.propagate(start_frame_index=0, direction="forward"),
        full.propagate(start_frame_index=0, direction="forward"),
        strict=True,
    ):
        store.keep(index, masks)
        # then every frame is what the state without a store gives, none recalled unshown
        assert same(masks, plain), index

    # and once shown, all but the last 16 results are let go
    assert len(flat._results[1]) == 16


def test_anchors_given_back_in_the_engines_own_form_continue_exactly_as_the_original() -> None:
    # given a state working at a size below the video's, clicked on frame 0, propagated, and
    # corrected on a propagated frame (so its anchor has a prior and a stand-in click)
    frames = DrawnFrames(40)
    engine = ClassicEngine(ClassicEngine.Options(work_size=64))
    original = engine.open(frames)
    clicked(original, frames, 0)
    list(original.propagate(start_frame_index=0))
    x, y = frames.point(20)
    correction = {"frame_index": 20, "object_id": 1, "points": [[x + 9 / (WIDTH - 1), y]]}
    original.add_points(**correction, labels=[0])
    anchors = {
        frame: (
            original.prompts[1][frame],
            original.masks(frame_index=frame)[1],
            original.anchor_kept(object_id=1, frame_index=frame),
        )
        for frame in (0, 20)
    }
    assert original._anchors[1][20].seeds
    assert original._anchors[1][20].prior is not None

    # when new states are given the anchors back: with their kept form, and without it
    exact, rebuilt = engine.open(frames), engine.open(frames)
    for frame, (prompt, mask, kept) in anchors.items():
        exact.restore(object_id=1, frame_index=frame, prompt=prompt, mask=mask, kept=kept)
        rebuilt.restore(object_id=1, frame_index=frame, prompt=prompt, mask=mask)

    # then a propagation from the one with the kept form is the original's, frame for frame
    before = dict(original.propagate(start_frame_index=0))
    after = dict(exact.propagate(start_frame_index=0))
    assert all(same(after[i], before[i]) for i in range(40))
    # and so is a click added to the correction's; while anchors rebuilt from masks drift
    added = {**correction, "points": [*correction["points"], [x, y]], "labels": [0, 1]}
    assert same(exact.add_points(**added), original.add_points(**added))
    drifted = dict(rebuilt.propagate(start_frame_index=0))
    assert not all(same(drifted[i], before[i]) for i in range(40))


def test_a_kept_form_from_another_working_size_is_passed_by() -> None:
    frames = DrawnFrames(5)
    small = ClassicEngine(ClassicEngine.Options(work_size=64)).open(frames)
    clicked(small, frames, 2)
    kept = small.anchor_kept(object_id=1, frame_index=2)
    mask = small.masks(frame_index=2)[1]

    state = opened(frames, None)  # working at the video's own size
    state.restore(object_id=1, frame_index=2, prompt=small.prompts[1][2], mask=mask, kept=kept)
    state.restore(object_id=2, frame_index=2, prompt=None, mask=mask, kept=b"not an npz")

    # then both are rebuilt from their masks, shown as given
    assert np.array_equal(state._anchors[1][2].mask, mask)
    assert np.array_equal(state._anchors[2][2].mask, mask)
    assert small.anchor_kept(object_id=1, frame_index=3) is None


def test_a_pass_taken_up_from_its_carry_goes_on_exactly_as_the_original() -> None:
    # given a state working below the video's size, clicked on frames 0 and 39, propagating
    frames = DrawnFrames(40)
    engine = ClassicEngine(ClassicEngine.Options(work_size=64))
    original = engine.open(frames)
    clicked(original, frames, 0)
    clicked(original, frames, 39)
    anchors = {
        frame: (
            original.prompts[1][frame],
            original.masks(frame_index=frame)[1],
            original.anchor_kept(object_id=1, frame_index=frame),
        )
        for frame in (0, 39)
    }
    before, carry = {}, None
    for index, masks in original.propagate(start_frame_index=0, direction="forward"):
        before[index] = masks
        if index == 12:
            carry = original.carry()  # as a job keeps it, after the frame was stored

    # when a new state, given the anchors back, takes the pass up from the carry
    taken_up = engine.open(frames)
    for frame, (prompt, mask, kept) in anchors.items():
        taken_up.restore(object_id=1, frame_index=frame, prompt=prompt, mask=mask, kept=kept)
    assert taken_up.carry_restore(carry) == 12
    steps = []
    step = taken_up._sweep_step
    taken_up._sweep_step = lambda *args: steps.append(args) or step(*args)
    after = dict(taken_up.propagate(start_frame_index=13, direction="forward"))

    # then it goes on exactly as the original went, frame for frame
    assert sorted(after) == list(range(13, 40))
    assert all(same(after[i], before[i]) for i in range(13, 40))
    # from frame 12's track: frames 13 to 19 carried on, 38 back to 20 from the anchor on 39
    # (without the carry, frames 1 to 12 would be carried again first)
    assert len(steps) == 7 + 19
    # and a carry it cannot take up is passed by
    assert taken_up.carry_restore(b"not a carry") is None
    assert engine.open(frames).carry_restore(carry) is None  # it holds no such anchors
