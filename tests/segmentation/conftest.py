from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
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


@pytest.fixture(scope="session")
def slow_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A minute of 320x240 noise at 25 fps: transcoded (not remuxed), in several seconds."""
    return noise_video(tmp_path_factory.mktemp("slow") / "noise.mp4", frames=1500)


def noise_video(path: Path, *, frames: int) -> Path:
    """``frames`` of 320x240 noise at 25 fps (50 pictures over and over) as H.264 at
    ``path``: a video the server must transcode, not remux; ``path``."""
    noise = [
        np.random.default_rng(n).integers(0, 256, (240, 320, 3), dtype=np.uint8) for n in range(50)
    ]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "30"}
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(noise[index % 50], format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, 25)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
