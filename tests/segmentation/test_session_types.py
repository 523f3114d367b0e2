"""What session operations answer, as a worker sends it to a web process: masks as COCO RLE by
object ID, and the API's errors by their codes."""

from __future__ import annotations

import numpy as np
import pytest

from segmentation.errors import (
    ERROR_KINDS,
    ErrorCode,
    RateLimited,
    ResourceExhausted,
    ServerBusy,
    SessionNotFound,
    TooManySessions,
    error_from_message,
)
from segmentation.services.session_types import Annotations, FrameMasks, ObjectMask


def frame() -> FrameMasks:
    mask = np.zeros((2, 3), dtype=bool)
    mask[1, 2] = True
    return FrameMasks.from_masks(4, {7: mask, 2: np.zeros((2, 3), dtype=bool)}, 0.25)


def test_a_frame_s_masks_travel_as_rle_by_object_id():
    assert frame().as_message() == {
        "frame_index": 4,
        "objects": [
            {"object_id": 2, "mask": {"size": [2, 3], "counts": "6"}},
            {"object_id": 7, "mask": {"size": [2, 3], "counts": "51"}},
        ],
        "engine_seconds": 0.25,
    }


def test_a_frame_comes_back_as_itself():
    assert FrameMasks.from_message(frame().as_message()) == frame()


def test_annotations_keep_the_objects_with_a_pixel_in_the_annotation_file_s_shape():
    masks = {7: np.ones((1, 2), dtype=bool), 2: np.zeros((1, 2), dtype=bool)}
    annotations = Annotations("gallery/a.mp4", (FrameMasks.from_masks(3, masks, nonempty=True),))

    assert annotations.as_message() == {
        "video": "gallery/a.mp4",
        "frames": [
            {
                "frame_index": 3,
                "objects": [{"object_id": 7, "mask": {"size": [1, 2], "counts": "02"}}],
            }
        ],
    }
    assert Annotations.from_message(annotations.as_message()) == annotations
    assert annotations.frames[0].objects == (ObjectMask(7, {"size": [1, 2], "counts": "02"}),)


def test_every_code_has_its_error():
    assert sorted(ERROR_KINDS) == sorted(ErrorCode)
    assert all(kind.code == code for code, kind in ERROR_KINDS.items())


@pytest.mark.parametrize("kind", ERROR_KINDS.values())
def test_every_api_error_comes_back_as_itself(kind):
    decoded = error_from_message(kind("what went wrong").as_message())

    assert type(decoded) is kind
    assert decoded.message == "what went wrong"


@pytest.mark.parametrize("kind", [ResourceExhausted, RateLimited, ServerBusy])
def test_an_error_that_says_when_to_come_back_says_it_through_a_worker(kind):
    decoded = error_from_message(kind("spent", retry_after=12.5).as_message())

    assert (type(decoded), decoded.message, decoded.retry_after) == (kind, "spent", 12.5)


def test_the_codes_are_the_api_s():
    assert SessionNotFound("gone").as_message() == {"code": "SESSION_NOT_FOUND", "message": "gone"}
    assert TooManySessions("full").as_message()["code"] == ErrorCode.TOO_MANY_SESSIONS.value


def test_a_failure_of_the_worker_is_not_an_api_error():
    decoded = error_from_message({"code": "WORKER_FAILED", "message": "boom"})

    assert type(decoded) is RuntimeError
    assert str(decoded) == "boom"


def test_each_code_carries_the_status_a_plain_endpoint_answers_with():
    assert {code.value: code.http_status for code in ErrorCode} == {
        "SESSION_NOT_FOUND": 404,
        "VIDEO_NOT_FOUND": 404,
        "UPLOAD_NOT_FOUND": 404,
        "JOB_NOT_FOUND": 404,
        "BAD_USER_INPUT": 400,
        "UPLOAD_TOO_LARGE": 413,
        "UNSUPPORTED_MEDIA": 400,
        "TOO_MANY_SESSIONS": 503,
        "TOO_MANY_CLIENT_SESSIONS": 429,
        "RESOURCE_EXHAUSTED": 429,
        "RATE_LIMITED": 429,
        "QUERY_TOO_COMPLEX": 400,
        "SERVER_BUSY": 503,
        "STORAGE_FULL": 507,
    }
