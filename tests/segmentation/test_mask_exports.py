"""``POST /annotations/coco.json`` and ``POST /annotations/yolo.zip``: annotations in the
formats other tools read, each read back here by such a reader (pycocotools' ``COCO``; the YOLO
label text parsed as Ultralytics defines it and drawn back with OpenCV). The DAVIS palette PNGs
are ``/annotations/masks.zip`` (tests/segmentation/test_mask_archives.py)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import threading
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest
from django.test import Client
from pycocotools.coco import COCO

from core.processes import ProcessPool
from core.threads import Stopped
from segmentation.models import Video
from segmentation.rle import rle_encode
from segmentation.services import exports
from segmentation.services.videos import video_register
from segmentation.services.yolo_polygons import mask_polygons
from tests.core.process_calls import busy
from tests.segmentation.synthetic import HEIGHT, WIDTH
from tests.timing import until

pytestmark = pytest.mark.django_db

FRAMES = 12


@pytest.fixture
def clip(media: Path, video_file: Path) -> Video:
    destination = media / "gallery" / "export-clip.mp4"
    destination.parent.mkdir(exist_ok=True)
    shutil.copy(video_file, destination)
    return video_register(path=destination, origin=Video.Origin.GALLERY)


def box(top: int, left: int, bottom: int, right: int) -> np.ndarray:
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[top:bottom, left:right] = True
    return mask


def disk(y: int, x: int, radius: int) -> np.ndarray:
    ys, xs = np.mgrid[:HEIGHT, :WIDTH]
    return (ys - y) ** 2 + (xs - x) ** 2 <= radius**2


def ring() -> np.ndarray:
    """A disk with a hole, and a second part inside the hole."""
    mask = disk(100, 250, 40) & ~disk(100, 250, 25)
    mask |= disk(100, 250, 8)
    return mask


MASKS = {
    (0, 4): disk(60, 80, 30),
    (0, 9): box(120, 20, 180, 140),
    (3, 4): box(10, 10, 20, 30) | box(150, 200, 170, 300),  # two parts: two instances
    (3, 9): np.zeros((HEIGHT, WIDTH), bool),  # out of sight on this frame
    (7, 2): ring(),
}


def annotations(video: Video) -> dict:
    frames: dict[int, list] = {}
    for (frame_index, object_id), mask in MASKS.items():
        item = {"object_id": object_id, "mask": rle_encode(mask)}
        frames.setdefault(frame_index, []).append(item)
    return {
        "video": video.path,
        "frames": [{"frame_index": i, "objects": objects} for i, objects in frames.items()],
    }


def post(client: Client, url: str, data: object):
    body = data if isinstance(data, bytes) else json.dumps(data)
    return client.post(url, body, content_type="application/json")


def test_coco_instances_read_back_by_pycocotools(
    client: Client, clip: Video, tmp_path: Path
) -> None:
    response = post(client, "/annotations/coco.json", annotations(clip))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="export-clip-coco.json"'
    file = tmp_path / "instances.json"
    file.write_bytes(response.content)
    coco = COCO(str(file))
    assert [coco.imgs[i] for i in sorted(coco.imgs)] == [
        {"id": i + 1, "file_name": f"{i:05d}.jpg", "width": WIDTH, "height": HEIGHT}
        for i in range(FRAMES)
    ]
    assert [coco.cats[i]["name"] for i in sorted(coco.cats)] == [
        "object_2",
        "object_4",
        "object_9",
    ]
    category_of = {2: 1, 4: 2, 9: 3}
    found = {}
    for ann in coco.loadAnns(coco.getAnnIds()):
        key = (ann["image_id"] - 1, coco.cats[ann["category_id"]]["name"])
        mask = coco.annToMask(ann).astype(bool)
        found[key] = mask
        assert ann["iscrowd"] == 0
        assert ann["area"] == mask.sum()
        ys, xs = np.nonzero(mask)
        assert ann["bbox"] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
    # every non-empty mask, exactly; the empty one is no instance
    expected = {
        (frame, f"object_{object_id}"): mask
        for (frame, object_id), mask in MASKS.items()
        if mask.any()
    }
    assert sorted(found) == sorted(expected)
    for key, mask in expected.items():
        np.testing.assert_array_equal(found[key], mask)
    assert coco.getAnnIds(imgIds=[4], catIds=[category_of[4]]) == [3]  # frame 3's object 4


def read_label(text: str) -> list[tuple[int, np.ndarray]]:
    """A YOLO segmentation label file, checked as the format defines it: per line a class index,
    then x y pairs normalised to [0, 1], at least three points."""
    instances = []
    for line in text.splitlines():
        head, *numbers = line.split(" ")
        assert head.isdigit()
        assert len(numbers) % 2 == 0
        assert len(numbers) >= 6
        points = np.array([float(n) for n in numbers]).reshape(-1, 2)
        assert ((points >= 0) & (points <= 1)).all()
        instances.append((int(head), points))
    return instances


def drawn(points: np.ndarray) -> np.ndarray:
    pixels = np.rint(points * [WIDTH, HEIGHT]).astype(np.int32)
    canvas = np.zeros((HEIGHT, WIDTH), np.uint8)
    cv2.fillPoly(canvas, [pixels], 1)
    return canvas.astype(bool)


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return (a & b).sum() / (a | b).sum()


def test_yolo_labels_parsed_and_drawn_back(client: Client, clip: Video) -> None:
    response = post(client, "/annotations/yolo.zip", annotations(clip))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="export-clip-yolo.zip"'
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert sorted(archive.namelist()) == sorted(
        ["classes.txt", "data.yaml", *(f"labels/{i:05d}.txt" for i in range(FRAMES))]
    )
    assert archive.read("classes.txt").decode() == "object_2\nobject_4\nobject_9\n"
    assert archive.read("data.yaml").decode().splitlines()[3:] == [
        "path: .",
        "train: images",
        "val: images",
        "nc: 3",
        "names:",
        "  0: object_2",
        "  1: object_4",
        "  2: object_9",
    ]
    labels = {i: read_label(archive.read(f"labels/{i:05d}.txt").decode()) for i in range(FRAMES)}
    assert {i: len(found) for i, found in labels.items() if found} == {0: 2, 3: 2, 7: 2}
    # frame 0: a disk (object 4, class 1) and a box (object 9, class 2)
    (disk_class, disk_points), (box_class, box_points) = labels[0]
    assert (disk_class, box_class) == (1, 2)
    assert iou(drawn(disk_points), MASKS[0, 4]) >= 0.9
    assert iou(drawn(box_points), MASKS[0, 9]) == 1.0
    # frame 3: object 4's two parts, a line each, each drawn back onto its own part
    assert [cls for cls, _ in labels[3]] == [1, 1]
    assert iou(drawn(labels[3][0][1]), box(10, 10, 20, 30)) == 1.0
    assert iou(drawn(labels[3][1][1]), box(150, 200, 170, 300)) == 1.0
    # frame 7: the ring's outline (its hole is filled) and the part inside the hole
    (outer_class, outer), (inner_class, inner) = labels[7]
    assert (outer_class, inner_class) == (0, 0)
    assert iou(drawn(outer), disk(100, 250, 40)) >= 0.9
    assert iou(drawn(inner), disk(100, 250, 8)) >= 0.9


def test_a_masks_parts_are_outlined_in_the_order_of_their_first_pixels() -> None:
    # given two parts, the right one starting a row above the left one
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[59:71, 11:21] = True
    mask[58:71, 74:81] = True

    polygons = mask_polygons(mask=mask)

    # then the right one comes first, as a scan of the rows meets them (labelling the parts,
    # which OpenCV does two rows at a time, put the left one first), each outline its box's
    # corners from that first pixel on
    assert [polygon.tolist() for polygon in polygons] == [
        [[74, 58], [74, 70], [80, 70], [80, 58]],
        [[11, 59], [11, 70], [20, 70], [20, 59]],
    ]


@pytest.mark.parametrize("url", ["/annotations/coco.json", "/annotations/yolo.zip"])
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
        ({"video": "gallery/export-clip.mp4", "frames": [{"frame_index": 12, "objects": []}]},
         400, {
            "error": "frames[0].frame_index must be within 0..11, got 12",
            "code": "BAD_USER_INPUT",
        }),
    ],
)  # fmt: skip
def test_refusals(
    client: Client, clip: Video, url: str, data: object, status: int, body: dict
) -> None:
    response = post(client, url, data)

    assert (response.status_code, response.json()) == (status, body)


@pytest.mark.parametrize("url", ["/annotations/coco.json", "/annotations/yolo.zip"])
def test_only_post(client: Client, url: str) -> None:
    response = client.get(url)

    assert (response.status_code, response.json()) == (
        405,
        {"error": "method not allowed: POST the annotations", "code": "BAD_USER_INPUT"},
    )


def test_past_the_exports_line_an_export_is_refused_busy_with_when_to_come_back(
    client: Client, clip: Video, monkeypatch
) -> None:
    # given one export process, no room to wait, and an export converting
    pool = ProcessPool(size=1, queued=0, niceness=10, idle_sec=30)
    monkeypatch.setattr(exports, "export_processes", lambda: pool)
    stop = threading.Event()

    def hold() -> None:
        with contextlib.suppress(Stopped):
            pool.call(busy, stop=stop, seconds=30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        until(lambda: pool.turns.holding == 1)

        # when another export comes
        response = post(client, "/annotations/coco.json", annotations(clip))

        # then it is refused at once, busy, with the seconds to wait
        assert (response.status_code, response.json(), response["Retry-After"]) == (
            503,
            {
                "error": "too many exports at once: 1 being converted and 0 waiting; "
                "try again in 1 s",
                "code": "SERVER_BUSY",
            },
            "1",
        )
    finally:
        stop.set()
        holder.join(10)
        pool.close()
