"""The ``sam2`` engine with a store beside it (``VideoState.recall``): the tracker keeps the
conditioning frames and what is within reach, tracks as without the store, rebuilds what a far
correction needs from stored masks, and takes anchors back (``VideoState.restore``). A small
random checkpoint, on the CPU (and on CUDA where there is a GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from segmentation.engines import engine_create
from segmentation.engines.base import Masks
from segmentation.engines.footprint import held_bytes
from segmentation.engines.sam2.engine import Sam2Engine, Sam2VideoState
from tests.segmentation.engines.drawn import DrawnFrames, Store
from tests.segmentation.engines.sam2.conftest import DEVICES
from tests.segmentation.engines.sam2.small import small_checkpoint

OTHER = [0.9, 0.15]  # where the second object is clicked


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_checkpoint(tmp_path_factory.mktemp("sam2") / "small.pt")


@pytest.fixture(scope="module", params=DEVICES)
def engine(checkpoint: Path, request: pytest.FixtureRequest) -> Sam2Engine:
    options = {"checkpoint": str(checkpoint), "device": request.param, "precision": "float32"}
    return engine_create("sam2", options)


def opened(engine: Sam2Engine, frames: DrawnFrames, store: Store | None) -> Sam2VideoState:
    state = engine.open(frames)
    if store is not None:
        state.recall = store.recall
    return state


def clicked(state: Sam2VideoState, frames: DrawnFrames, frame_index: int) -> Masks:
    state.add_points(
        frame_index=frame_index, object_id=1, points=[frames.point(frame_index)], labels=[1]
    )
    return state.add_points(frame_index=frame_index, object_id=2, points=[OTHER], labels=[1])


def same(first: Masks, second: Masks) -> bool:
    return list(first) == list(second) and all(
        np.array_equal(mask, second[k]) for k, mask in first.items()
    )


def test_with_a_store_a_pass_tracks_as_without_it_keeping_only_what_is_in_reach(
    engine: Sam2Engine,
) -> None:
    # given two objects clicked on frame 60 of 200, on a state with a store and one without
    frames = DrawnFrames(200)
    store = Store()
    flat, full = opened(engine, frames, store), opened(engine, frames, None)
    store.keep(60, clicked(flat, frames, 60))
    clicked(full, frames, 60)
    held: dict[tuple[str, int], int] = {}

    # when both propagate forward, then backward from the clicked frame
    yielded = {}
    for (index, masks), (_, plain) in zip(
        flat.propagate(start_frame_index=60), full.propagate(start_frame_index=60), strict=True
    ):
        yielded[index] = store.keep(index, masks)
        assert same(masks, plain), index
        if index in (100, 180):
            held["flat", index], held["full", index] = held_bytes(flat), held_bytes(full)

    # then the state with the store holds as much at frame 180 as at frame 100, the one
    # without it 80 frames' outputs more (mask logits 32 x 32 in float32 alone: 4 kB)
    assert sorted(yielded) == list(range(200))
    assert held["flat", 180] == held["flat", 100]
    assert held["full", 180] - held["full", 100] > 80 * 2 * 4096
    # and it holds the outputs within reach (16 frames) of the last frame tracked (0, going
    # backward) and of the pass's start (60, a conditioning frame), and none other
    assert flat.tracker.reach == 16
    near = [*range(16), *range(44, 60), *range(61, 77)]
    for track in flat.tracker.tracks.values():
        assert sorted(track.tracked) == near
        assert list(track.prompted) == [60]
        assert track.rebuilt == {}
    # and every frame's masks are those it yielded, the dropped ones recalled
    assert all(same(flat.masks(frame_index=i), yielded[i]) for i in range(200))
    for state in (flat, full):
        state.close()


def propagated(engine: Sam2Engine, frames: DrawnFrames, store: Store | None) -> Sam2VideoState:
    state = opened(engine, frames, store)
    masks = clicked(state, frames, 0)
    if store is not None:
        store.keep(0, masks)
    for index, masks in state.propagate(start_frame_index=0, direction="forward"):
        if store is not None:
            store.keep(index, masks)
    return state


def test_a_correction_on_the_last_tracked_frame_is_as_without_a_store(
    engine: Sam2Engine,
) -> None:
    # given both objects tracked over 120 frames, with a store and without
    frames = DrawnFrames(120)
    flat, full = propagated(engine, frames, Store()), propagated(engine, frames, None)

    # when each is corrected on frame 119, whose memories in reach are all held
    kwargs = {"frame_index": 119, "object_id": 1, "points": [frames.point(119)], "labels": [0]}

    # then the corrections are the same, and nothing was rebuilt
    assert same(flat.add_points(**kwargs), full.add_points(**kwargs))
    assert all(track.rebuilt == {} for track in flat.tracker.tracks.values())
    for state in (flat, full):
        state.close()


def test_a_far_correction_rebuilds_the_memories_it_attends_to_from_stored_masks(
    engine: Sam2Engine,
) -> None:
    # given both objects tracked over 120 frames, frame 60's outputs long dropped
    frames = DrawnFrames(120)
    store = Store()
    state = propagated(engine, frames, store)
    assert 59 not in state.tracker.tracks[1].tracked

    # when object 1 is corrected on frame 60
    answer = state.add_points(
        frame_index=60, object_id=1, points=[frames.point(60)], labels=[0], clear_old_points=False
    )

    # then the 15 frames before it were made again from their stored masks, for object 1 only
    track = state.tracker.tracks[1]
    assert sorted(track.rebuilt) == list(range(45, 60))
    assert state.tracker.tracks[2].rebuilt == {}
    # each as a given mask is made, with its memory: as a state given the stored mask makes it
    given = opened(engine, frames, None)
    given.give_mask(frame_index=59, object_id=1, mask=store.frames[59][1])
    with torch.inference_mode():
        given.tracker.prepare()
    made, rebuilt = given.tracker.tracks[1].prompted[59], track.rebuilt[59]
    for name in ("mask_logits", "pointer", "score", "memory"):
        assert torch.equal(getattr(made, name).cpu(), getattr(rebuilt, name).cpu()), name
    # and the frame shows the correction, object 2 as stored where object 1 leaves it room
    assert list(answer) == [1, 2]
    assert same(state.masks(frame_index=60), answer)
    assert np.array_equal(answer[2], store.frames[60][2] & ~answer[1])
    # and a propagation from it makes it a conditioning frame of object 1, and rebuilds what
    # object 2 (tracked there anew) attends to
    steps = state.propagate(start_frame_index=60, direction="forward", max_frame_num_to_track=3)
    assert [index for index, _ in steps] == [60, 61, 62, 63]
    assert list(track.prompted) == [0, 60]
    assert sorted(state.tracker.tracks[2].rebuilt) == list(range(45, 60))
    for opened_state in (state, given):
        opened_state.close()


def test_a_restored_mask_is_shown_as_given_and_anchors_as_the_original(
    engine: Sam2Engine,
) -> None:
    # given a state where a mask was given on frame 10 and propagated
    frames = DrawnFrames(40)
    mask = frames.mask(10)
    original = opened(engine, frames, None)
    original.give_mask(frame_index=10, object_id=1, mask=mask)
    before = dict(original.propagate(start_frame_index=10))

    # when a new state is given that anchor back
    restored = opened(engine, frames, Store())
    restored.restore(object_id=1, frame_index=10, prompt=None, mask=mask)

    # then the frame shows the mask at once, as given, without the model running
    assert same(restored.masks(frame_index=10), {1: mask})
    assert len(restored._features) == 0
    assert (restored.object_ids, restored.prompts) == ([1], {})
    # and a propagation from it gives the original's masks on every other frame
    after = dict(restored.propagate(start_frame_index=10))
    assert sorted(after) == sorted(before) == list(range(40))
    assert all(same(after[i], before[i]) for i in range(40) if i != 10)
    assert same(after[10], {1: mask})
    for state in (original, restored):
        state.close()


def test_restored_clicks_are_shown_at_once_and_propagate(engine: Sam2Engine) -> None:
    # given two objects clicked on frame 10, as a store keeps them
    frames = DrawnFrames(40)
    original = opened(engine, frames, None)
    shown = clicked(original, frames, 10)
    prompts = {object_id: original.prompts[object_id][10] for object_id in (1, 2)}

    # when a new state is given both anchors back
    restored = opened(engine, frames, Store())
    for object_id, prompt in prompts.items():
        restored.restore(object_id=object_id, frame_index=10, prompt=prompt, mask=shown[object_id])

    # then the frame shows their masks at once, without the model running, and holds the clicks
    assert same(restored.masks(frame_index=10), shown)
    assert len(restored._features) == 0
    assert restored.prompts == {1: {10: prompts[1]}, 2: {10: prompts[2]}}
    # and a propagation from them tracks both (the anchors made conditioning frames then)
    after = dict(restored.propagate(start_frame_index=10))
    assert sorted(after) == list(range(40))
    assert same(after[10], shown)
    assert all(list(after[i]) == [1, 2] for i in range(40))
    assert all(list(t.prompted) == [10] for t in restored.tracker.tracks.values())
    # and a click added to the clicks corrects the restored frame
    x, y = frames.point(10)
    corrected = restored.add_points(
        frame_index=10, object_id=1, points=[[x, y]], labels=[0], clear_old_points=False
    )
    assert len(restored.prompts[1][10].points) == 2
    assert corrected[1].shape == shown[1].shape
    for state in (original, restored):
        state.close()


def test_a_state_given_its_work_back_shows_every_stored_frame_without_the_model(
    engine: Sam2Engine,
) -> None:
    # given a store holding a propagation's masks from two objects clicked on a frame
    frames = DrawnFrames(30)
    store = Store()
    original = opened(engine, frames, store)
    store.keep(5, clicked(original, frames, 5))
    for index, masks in original.propagate(start_frame_index=5):
        store.keep(index, masks)

    # when a new state is given the anchors back, beside the store
    restored = opened(engine, frames, store)
    for object_id in (1, 2):
        prompt, mask = original.prompts[object_id][5], store.frames[5][object_id]
        restored.restore(object_id=object_id, frame_index=5, prompt=prompt, mask=mask)

    # then every frame shows the masks stored for it, and no frame was encoded for it
    assert all(same(restored.masks(frame_index=i), store.frames[i]) for i in range(30))
    assert len(restored._features) == 0
    for state in (original, restored):
        state.close()
