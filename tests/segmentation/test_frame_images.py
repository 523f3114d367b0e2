"""``GET /frames/<index>.jpg?video=<path>``: the frames the engine segments, as JPEG files."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import pytest
from django.test import Client

from segmentation.engines.frames import VideoFileFrames
from segmentation.models import DeletionId, Video
from segmentation.services import frame_images
from segmentation.services.consent import user_data_delete
from segmentation.services.videos import video_register
from tests.segmentation.synthetic import make_video, write_mp4

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


def test_past_the_quota_the_least_recently_used_videos_frames_go(
    client: Client, clip: Video, media: Path, frame_dir: Path, settings, monkeypatch, tmp_path
) -> None:
    # given the clip's first three frames kept, and a quota they fill
    other_file = write_mp4(make_video(13), tmp_path / "other.mp4")
    destination = media / "gallery" / "other.mp4"
    shutil.copy(other_file, destination)
    other = video_register(path=destination, origin=Video.Origin.GALLERY)
    for index in range(3):
        get(client, index, clip.path)
    settings.FRAME_IMAGE_QUOTA_BYTES = sum(
        file.stat().st_size for file in (frame_dir / clip.sha256).iterdir()
    )

    # when a frame of another video is asked for while the clip's were served a moment ago
    in_use = get(client, 0, other.path)
    kept_in_use = kept(frame_dir)
    # and another once no frame was served for longer than frame_images.IN_USE_SEC
    monkeypatch.setattr(frame_images, "IN_USE_SEC", 0)
    monkeypatch.setattr(frame_images, "RECOUNT_SEC", 0)
    past = get(client, 1, other.path)

    # then the clip's frames stay while in use (the quota exceeded), and go after
    assert (in_use.status_code, past.status_code) == (200, 200)
    assert kept_in_use == {
        clip.sha256: ["00000.jpg", "00001.jpg", "00002.jpg"],
        other.sha256: ["00000.jpg"],
    }
    assert kept(frame_dir) == {other.sha256: ["00000.jpg", "00001.jpg"]}
    # and are made again when asked for
    assert get(client, 2, clip.path).content == engine_jpeg(media / clip.path, 2)


def kept(frame_dir: Path) -> dict[str, list[str]]:
    return {
        folder.name: sorted(file.name for file in folder.iterdir())
        for folder in frame_dir.iterdir()
    }
