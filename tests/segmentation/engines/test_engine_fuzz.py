"""Both engines on small generated videos and operation sequences (hypothesis): whatever
the API accepts, no engine operation raises, and every answer is a set of non-overlapping masks
of the video's size. Boxes among them, valid (down to less than a pixel) or with one fault: a
faulty one is refused with its own message and changes nothing."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segmentation.engines.base import Engine, PromptError, VideoState
from segmentation.engines.classic import ClassicEngine
from segmentation.engines.frames import FrameSource
from segmentation.engines.sam2.engine import Sam2Engine, Sam2Options
from tests.segmentation.box_prompts import box_prompts
from tests.segmentation.engines.sam2.small import small_checkpoint


class ArrayFrames(FrameSource):
    def __init__(self, images: np.ndarray) -> None:
        super().__init__()
        self.images = images
        self.height, self.width = images.shape[1:3]
        self.fps = 24.0

    def __len__(self) -> int:
        return len(self.images)

    def _decode(self, index: int) -> np.ndarray:
        return self._keep(index, self.images[index])


@st.composite
def videos(draw: st.DrawFn) -> np.ndarray:
    count = draw(st.integers(1, 4))
    height, width = draw(st.integers(2, 40)), draw(st.integers(2, 56))
    kind = draw(st.sampled_from(["flat", "noise", "halves", "square"]))
    random = np.random.default_rng(draw(st.integers(0, 2**16)))
    if kind == "flat":
        colour = random.integers(0, 256, 3)
        return np.broadcast_to(colour, (count, height, width, 3)).astype(np.uint8)
    if kind == "noise":
        return random.integers(0, 256, (count, height, width, 3)).astype(np.uint8)
    images = np.zeros((count, height, width, 3), np.uint8)
    for index in range(count):
        if kind == "halves":
            images[index, :, : max(1, width // 2)] = 255
        else:  # a square that moves by a pixel a frame
            top, left = height // 4 + index, width // 4 + index
            images[index, top : top + max(1, height // 2), left : left + max(1, width // 2)] = 200
    return images


POINT = st.tuples(st.floats(0, 1), st.floats(0, 1))
OPERATION = st.one_of(
    st.tuples(
        st.just("click"),
        st.integers(0, 3),
        st.integers(1, 3),
        st.lists(st.tuples(POINT, st.integers(0, 1)), min_size=1, max_size=4),
        st.booleans(),
    ),
    st.tuples(st.just("box"), st.integers(0, 3), st.integers(1, 3), box_prompts()),
    st.tuples(st.just("mask"), st.integers(0, 3), st.integers(1, 3), st.integers(0, 2**16)),
    st.tuples(st.just("clear"), st.integers(0, 3), st.integers(1, 3)),
    st.tuples(st.just("remove"), st.integers(1, 3)),
    st.tuples(st.just("reset")),
    st.tuples(st.just("propagate"), st.integers(0, 3)),
)


@settings(max_examples=200, deadline=None)
@given(videos(), st.lists(OPERATION, min_size=1, max_size=8))
def test_classic_takes_whatever_the_api_accepts(images: np.ndarray, operations) -> None:
    operations_run(ClassicEngine(), images, operations)


@cache
def small_sam2(folder: Path) -> Engine:
    return Sam2Engine(
        Sam2Options(checkpoint=str(small_checkpoint(folder / "small.pt")), device="cpu")
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(videos(), st.lists(OPERATION, min_size=1, max_size=6))
def test_sam2_takes_whatever_the_api_accepts(
    tmp_path_factory: pytest.TempPathFactory, images: np.ndarray, operations
) -> None:
    folder = tmp_path_factory.getbasetemp() / "fuzz-sam2"
    folder.mkdir(exist_ok=True)
    operations_run(small_sam2(folder), images, operations)


def operations_run(engine: Engine, images: np.ndarray, operations) -> None:
    frames = ArrayFrames(images)
    state = engine.open(frames)
    shape = images.shape[1:3]
    for operation in operations:
        kind, *arguments = operation
        answers = []
        if kind == "click":
            frame, object_id, clicks, keep = arguments
            frame = frame % len(images)
            points = [list(point) for point, _ in clicks]
            labels = [label for _, label in clicks]
            answers.append(
                state.add_points(
                    frame_index=frame,
                    object_id=object_id,
                    points=points,
                    labels=labels,
                    clear_old_points=not keep,
                )
            )
        elif kind == "box":
            frame, object_id, prompt = arguments
            frame = frame % len(images)
            asked = {
                "frame_index": frame,
                "object_id": object_id,
                "points": prompt.points,
                "labels": prompt.labels,
                "clear_old_points": prompt.clear_old_points,
            }
            if prompt.message is None:
                answers.append(state.add_points(**asked))
            else:
                before = state_seen(state, frame)
                with pytest.raises(PromptError) as refused:
                    state.add_points(**asked)
                assert str(refused.value) == prompt.message
                assert state_seen(state, frame) == before
        elif kind == "mask":
            frame, object_id, seed = arguments
            given_mask = np.random.default_rng(seed).random(shape) < 0.4
            answers.append(
                state.add_mask(
                    frame_index=frame % len(images), object_id=object_id, mask=given_mask
                )
            )
        elif kind == "clear":
            frame, object_id = arguments
            answers.append(
                state.clear_points_in_frame(frame_index=frame % len(images), object_id=object_id)
            )
        elif kind == "remove":
            state.remove_object(object_id=arguments[0])
        elif kind == "reset":
            state.clear_points_in_video()
        else:
            start = arguments[0] % len(images)
            steps = list(state.propagate(start_frame_index=start))
            assert sorted(index for index, _ in steps) == list(range(len(images)))
            answers += [masks for _, masks in steps]
        for masks in answers:
            assert sorted(masks) == sorted(state.object_ids)
            for mask in masks.values():
                assert mask.shape == shape
                assert mask.dtype == bool
            if masks:
                assert np.stack(list(masks.values())).sum(axis=0).max() <= 1
    state.close()


def state_seen(state: VideoState, frame: int) -> tuple:
    """What a refused prompt must leave as it was: the objects, their prompts, and the masks on
    the frame it was for, in comparable form."""
    prompts = {
        object_id: {index: (p.points.tolist(), p.labels.tolist()) for index, p in frames.items()}
        for object_id, frames in state.prompts.items()
    }
    masks = {object_id: mask.tolist() for object_id, mask in state.masks(frame_index=frame).items()}
    return list(state.object_ids), prompts, masks
