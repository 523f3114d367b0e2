"""``POST /annotations/masks.zip``: annotations as per-frame label PNGs in the DAVIS layout."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from django.test import Client
from PIL import Image

from segmentation.davis_png import davis_palette
from segmentation.models import Video
from segmentation.rle import rle_encode
from segmentation.services.videos import video_register
from tests.segmentation.synthetic import HEIGHT, WIDTH

pytestmark = pytest.mark.django_db


@pytest.fixture
def clip(media: Path, video_file: Path) -> Video:
    destination = media / "gallery" / "zip-clip.mp4"
    destination.parent.mkdir(exist_ok=True)
    shutil.copy(video_file, destination)
    return video_register(path=destination, origin=Video.Origin.GALLERY)


def box(top: int, left: int, bottom: int, right: int) -> np.ndarray:
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[top:bottom, left:right] = True
    return mask


def post(client: Client, data: object):
    body = data if isinstance(data, bytes) else json.dumps(data)
    return client.post("/annotations/masks.zip", body, content_type="application/json")


def test_every_frame_becomes_a_palette_png(client: Client, clip: Video) -> None:
    first, second, third = box(10, 10, 60, 80), box(40, 50, 100, 120), box(150, 200, 190, 300)
    data = {
        "video": clip.path,
        "frames": [
            {"frame_index": 5, "objects": [{"object_id": 7, "mask": rle_encode(third)}]},
            {
                "frame_index": 0,
                "objects": [
                    {"object_id": 1, "mask": rle_encode(first)},
                    {"object_id": 3, "mask": rle_encode(second)},  # listed last: wins the overlap
                ],
            },
        ],
    }

    response = post(client, data)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="zip-clip-masks.zip"'
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert archive.namelist() == [f"zip-clip/{i:05d}.png" for i in range(12)]
    expected = {i: np.zeros((HEIGHT, WIDTH), np.uint8) for i in range(12)}
    expected[0][first] = 1
    expected[0][second] = 3
    expected[5][third] = 7
    for index, labels in expected.items():
        image = Image.open(archive.open(f"zip-clip/{index:05d}.png"))
        assert image.mode == "P"
        assert image.getpalette() == davis_palette()
        np.testing.assert_array_equal(np.asarray(image), labels)


@pytest.mark.parametrize(
    ("data", "status", "body"),
    [
        (b"{not json", 400, {
            "error": "the body must be a JSON annotation file", "code": "BAD_USER_INPUT",
        }),
        ({"video": "gallery/none.mp4", "frames": []}, 404, {
            "error": "the annotations are of an unknown video 'gallery/none.mp4'",
            "code": "VIDEO_NOT_FOUND",
        }),
        # no stored path holds a NUL (PostgreSQL refused the query: 500 there)
        ({"video": "gallery/\x00.mp4", "frames": []}, 404, {
            "error": "the annotations are of an unknown video 'gallery/\\x00.mp4'",
            "code": "VIDEO_NOT_FOUND",
        }),
        ({"video": "gallery/zip-clip.mp4", "frames": [{"frame_index": 12, "objects": []}]}, 400, {
            "error": "frames[0].frame_index must be within 0..11, got 12",
            "code": "BAD_USER_INPUT",
        }),
        ({"video": "gallery/zip-clip.mp4", "frames": [{"frame_index": 2, "objects": [
            {"object_id": 256, "mask": rle_encode(box(0, 0, 1, 1))}]}]}, 400, {
            "error": "frame 2: object ID 256 cannot be a pixel value of a label PNG (1..255)",
            "code": "BAD_USER_INPUT",
        }),
    ],
)  # fmt: skip
def test_refusals(client: Client, clip: Video, data: object, status: int, body: dict) -> None:
    response = post(client, data)

    assert (response.status_code, response.json()) == (status, body)


def test_only_post(client: Client) -> None:
    response = client.get("/annotations/masks.zip")

    assert (response.status_code, response.json()) == (
        405,
        {"error": "method not allowed: POST the annotations", "code": "BAD_USER_INPUT"},
    )
