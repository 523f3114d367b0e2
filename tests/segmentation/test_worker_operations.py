"""What a worker's answers carry: masks as COCO RLE, and the API's errors by their codes."""

from __future__ import annotations

import numpy as np
import pytest

from segmentation.errors import (
    ErrorCode,
    ResourceExhausted,
    SegmentationError,
    SessionNotFound,
    TooManySessions,
)
from segmentation.services.sessions import FrameMasks
from segmentation.workers.operations import error_decode, error_encode, frame_encode


def test_a_frame_s_masks_travel_as_rle_by_object_id():
    mask = np.zeros((2, 3), dtype=bool)
    mask[1, 2] = True
    frame = FrameMasks(4, {7: mask, 2: np.zeros((2, 3), dtype=bool)}, engine_seconds=0.25)

    assert frame_encode(frame) == {
        "frame_index": 4,
        "objects": [[2, {"size": [2, 3], "counts": "6"}], [7, {"size": [2, 3], "counts": "51"}]],
        "engine_seconds": 0.25,
    }


@pytest.mark.parametrize("kind", SegmentationError.__subclasses__())
def test_every_api_error_comes_back_as_itself(kind):
    decoded = error_decode(error_encode(kind("what went wrong")))

    assert type(decoded) is kind
    assert decoded.message == "what went wrong"


def test_an_exhausted_budget_says_when_to_come_back_through_a_worker():
    decoded = error_decode(error_encode(ResourceExhausted("spent", retry_after=12.5)))

    assert (type(decoded), decoded.message, decoded.retry_after) == (
        ResourceExhausted,
        "spent",
        12.5,
    )


def test_the_codes_are_the_api_s():
    assert error_encode(SessionNotFound("gone")) == {"code": "SESSION_NOT_FOUND", "message": "gone"}
    assert error_encode(TooManySessions("full"))["code"] == ErrorCode.TOO_MANY_SESSIONS.value


def test_a_failure_of_the_worker_is_not_an_api_error():
    decoded = error_decode({"code": "WORKER_FAILED", "message": "boom"})

    assert type(decoded) is RuntimeError
    assert str(decoded) == "boom"
