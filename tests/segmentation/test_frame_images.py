"""``GET /frames/<index>.jpg?video=<path>``: the frames the engine segments, as JPEG files."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import pytest
from django.test import Client

from segmentation.engines.frames import VideoFileFrames
from segmentation.models import DeletionId, Video
from segmentation.services.consent import user_data_delete
from segmentation.services.videos import video_register

pytestmark = pytest.mark.django_db


@pytest.fixture
def frame_dir(settings, tmp_path: Path) -> Path:
    settings.FRAME_IMAGE_DIR = tmp_path / "frames"
    return settings.FRAME_IMAGE_DIR


@pytest.fixture
def clip(media: Path, video_file: Path, frame_dir: Path) -> Video:
    destination = media / "gallery" / "frames-clip.mp4"
    destination.parent.mkdir(exist_ok=True)
    shutil.copy(video_file, destination)
    return video_register(path=destination, origin=Video.Origin.GALLERY)


def engine_jpeg(video_file: Path, index: int) -> bytes:
    """The frame as the sessions' frame source decodes it, encoded as the endpoint does."""
    source = VideoFileFrames(video_file)
    try:
        image = cv2.cvtColor(source.frame(index), cv2.COLOR_RGB2BGR)
    finally:
        source.close()
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()


def get(client: Client, index: int, video: str):
    return client.get(f"/frames/{index}.jpg", {"video": video})


def test_frames_are_the_engines_frames(client: Client, clip: Video, video_file: Path) -> None:
    for index in [0, 7, 3, 11]:  # forward, back (a seek), and the last
        response = get(client, index, clip.path)

        assert response.status_code == 200
        assert response["Content-Type"] == "image/jpeg"
        assert response["Cache-Control"] == "public, max-age=86400"
        assert response.content == engine_jpeg(video_file, index)


def test_a_frame_is_decoded_once_and_kept(
    client: Client, clip: Video, media: Path, frame_dir: Path, video_file: Path
) -> None:
    get(client, 5, clip.path)
    kept = frame_dir / clip.sha256 / "00005.jpg"
    (media / clip.path).unlink()  # only the kept file can answer now

    response = get(client, 5, clip.path)

    assert response.status_code == 200
    assert response.content == kept.read_bytes()
    assert sorted(p.name for p in (frame_dir / clip.sha256).iterdir()) == ["00005.jpg"]


@pytest.mark.parametrize(
    ("index", "path", "status", "body"),
    [
        (12, "gallery/frames-clip.mp4", 400, {
            "error": "frame index 12 is outside the video's frames 0..11",
            "code": "BAD_USER_INPUT",
        }),
        (0, "gallery/elsewhere.mp4", 404, {
            "error": "no video at 'gallery/elsewhere.mp4'",
            "code": "VIDEO_NOT_FOUND",
        }),
        (0, "", 404, {"error": "no video at ''", "code": "VIDEO_NOT_FOUND"}),
    ],
)  # fmt: skip
def test_refusals(
    client: Client, clip: Video, frame_dir: Path, index: int, path: str, status: int, body: dict
) -> None:
    response = get(client, index, path)

    assert (response.status_code, response.json()) == (status, body)
    assert not frame_dir.exists()


def test_only_get_and_head(client: Client, clip: Video) -> None:
    assert client.post(f"/frames/0.jpg?video={clip.path}").status_code == 405


def test_deleting_a_clients_videos_deletes_their_frames(
    client: Client, media: Path, video_file: Path, frame_dir: Path
) -> None:
    destination = media / "uploads" / "mine.mp4"
    destination.parent.mkdir(exist_ok=True)
    shutil.copy(video_file, destination)
    deletion_id = DeletionId.objects.create(id="d-1", session_key="s-1")
    video = video_register(path=destination, origin=Video.Origin.UPLOAD, deletion_id=deletion_id)
    get(client, 2, video.path)
    assert (frame_dir / video.sha256 / "00002.jpg").exists()

    user_data_delete(deletion_id="d-1")

    assert not (frame_dir / video.sha256).exists()
