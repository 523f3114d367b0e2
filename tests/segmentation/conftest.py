from __future__ import annotations

from pathlib import Path

import pytest

from segmentation.engines.classic import ClassicEngine
from segmentation.engines.frames import VideoFileFrames
from segmentation.services.videos import video_register
from tests.segmentation.synthetic import Video, make_video, write_mp4


@pytest.fixture(scope="session")
def video() -> Video:
    return make_video()


@pytest.fixture(scope="session")
def video_file(video: Video, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mp4(video, tmp_path_factory.mktemp("video") / "shapes.mp4")


@pytest.fixture
def frames(video_file: Path):
    source = VideoFileFrames(video_file)
    yield source
    source.close()


@pytest.fixture
def state(frames):
    state = ClassicEngine().open(frames)
    yield state
    state.close()


@pytest.fixture(scope="session")
def media_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One media folder for the whole run, so the default video is drawn once."""
    return tmp_path_factory.mktemp("media")


@pytest.fixture
def media(settings, media_root: Path) -> Path:
    settings.MEDIA_ROOT = media_root
    settings.DEFAULT_VIDEO_PATH = ""
    return media_root


@pytest.fixture
def library_video(media: Path, video_file: Path) -> str:
    """The synthetic shapes video, in the library under uploads/; its path."""
    destination = media / "uploads" / "shapes.mp4"
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_bytes(video_file.read_bytes())
    return video_register(path=destination, origin="upload").path
