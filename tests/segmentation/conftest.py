from __future__ import annotations

from pathlib import Path

import pytest

from segmentation.engines.classic import ClassicEngine
from segmentation.engines.frames import VideoFileFrames
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
