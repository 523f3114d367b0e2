from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

DATA = bytes(range(256)) * 4  # 1024 bytes


@pytest.fixture
def clip(media: Path) -> str:
    (media / "gallery").mkdir(exist_ok=True)
    (media / "gallery" / "clip.mp4").write_bytes(DATA)
    return "/media/gallery/clip.mp4"


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_whole_file(client: Client, clip: str) -> None:
    response = client.get(clip)

    assert response.status_code == 200
    assert response["Content-Type"] == "video/mp4"
    assert response["Accept-Ranges"] == "bytes"
    assert response["Content-Length"] == "1024"
    assert body(response) == DATA


@pytest.mark.parametrize(
    ("header", "start", "end"),
    [
        ("bytes=0-3", 0, 3),
        ("bytes=1000-", 1000, 1023),
        ("bytes=-24", 1000, 1023),
        ("bytes=10-5000", 10, 1023),
    ],
)
def test_byte_ranges(client: Client, clip: str, header: str, start: int, end: int) -> None:
    response = client.get(clip, HTTP_RANGE=header)

    assert response.status_code == 206
    assert response["Content-Range"] == f"bytes {start}-{end}/1024"
    assert response["Content-Length"] == str(end - start + 1)
    assert body(response) == DATA[start : end + 1]


def test_range_past_the_end(client: Client, clip: str) -> None:
    response = client.get(clip, HTTP_RANGE="bytes=2000-")

    assert response.status_code == 416
    assert response["Content-Range"] == "bytes */1024"


def test_several_ranges_get_the_whole_file(client: Client, clip: str) -> None:
    response = client.get(clip, HTTP_RANGE="bytes=0-1,5-6")

    assert response.status_code == 200
    assert body(response) == DATA


@pytest.mark.parametrize(
    "path",
    [
        "/media/../db.sqlite3",
        "/media/gallery/missing.mp4",
        "/media/gallery/.clip.mp4.partial",
        "/media/gallery",
    ],
)
def test_nothing_outside_the_media_files(client: Client, clip: str, media: Path, path: str) -> None:
    (media / "gallery" / ".clip.mp4.partial").write_bytes(b"half")

    assert client.get(path).status_code == 404


def test_only_reads(client: Client, clip: str) -> None:
    assert client.post(clip).status_code == 405
    assert client.head(clip).status_code == 200
