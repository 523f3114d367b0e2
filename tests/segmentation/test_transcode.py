from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from segmentation.engines.frames import VideoFileFrames
from segmentation.transcode import MediaError, VideoInfo, probe, transcode
from tests.conftest import manage, migrated, project_env
from tests.segmentation.synthetic import Video, make_video, write_mp4


def frames_of(path: Path) -> list[np.ndarray]:
    source = VideoFileFrames(path)
    frames = [np.asarray(source.frame(i), dtype=int) for i in range(len(source))]
    source.close()
    return frames


def nearest(frame: np.ndarray, candidates: list[np.ndarray]) -> int:
    return int(np.argmin([np.abs(frame - c).mean() for c in candidates]))


def test_same_rate_keeps_every_frame_in_place(
    video_file: Path, video: Video, tmp_path: Path
) -> None:
    info = transcode(video_file, tmp_path / "out.mp4")

    assert info == VideoInfo(320, 192, 24.0, 12, 0.5)
    out = frames_of(tmp_path / "out.mp4")
    assert [nearest(frame, video.frames) for frame in out] == list(range(12))


def test_lower_rate_repeats_frames(tmp_path: Path) -> None:
    video = make_video(8)
    source = write_mp4(video, tmp_path / "slow.mp4", fps=12)

    info = transcode(source, tmp_path / "out.mp4")

    assert (info.fps, info.frame_count) == (24.0, 16)
    out = frames_of(tmp_path / "out.mp4")
    assert [nearest(frame, video.frames) for frame in out] == [n // 2 for n in range(16)]


def test_start_and_duration(tmp_path: Path) -> None:
    video = make_video(48)
    source = write_mp4(video, tmp_path / "long.mp4")

    info = transcode(source, tmp_path / "out.mp4", start=0.5, duration=1.0)

    assert (info.frame_count, info.duration) == (24, 1.0)
    out = frames_of(tmp_path / "out.mp4")
    assert [nearest(frame, video.frames) for frame in out] == list(range(12, 36))


def test_longest_side_is_capped_with_even_sizes(video_file: Path, tmp_path: Path) -> None:
    info = transcode(video_file, tmp_path / "small.mp4", max_side=150)

    assert (info.width, info.height) == (150, 90)
    assert probe(tmp_path / "small.mp4") == info


def test_time_range_without_frames(video_file: Path, tmp_path: Path) -> None:
    with pytest.raises(MediaError) as raised:
        transcode(video_file, tmp_path / "out.mp4", start=30.0)

    assert str(raised.value) == "shapes.mp4 has no video frames in the chosen time range"
    assert not (tmp_path / "out.mp4").exists()


def test_not_a_video(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.mp4"
    bogus.write_text("hello")

    with pytest.raises(MediaError) as raised:
        transcode(bogus, tmp_path / "out.mp4")

    assert str(raised.value) == "notes.mp4 is not a readable video"
    assert not (tmp_path / "out.mp4").exists()


def test_import_videos_command(video_file: Path, tmp_path: Path) -> None:
    folder = tmp_path / "incoming"
    folder.mkdir()
    (folder / "Holiday clip.mp4").write_bytes(video_file.read_bytes())
    (folder / "broken.mov").write_text("not a video")
    (folder / "readme.txt").write_text("ignored")
    env = project_env(tmp_path / "var")
    migrated(env)

    result = manage("import_videos", str(folder), env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "imported Holiday clip.mp4 as gallery/Holiday-clip.mp4 (320x192, 12 frames)",
        "1 imported, 1 skipped",
    ]
    assert (
        result.stderr.strip()
        == f"skipped {folder / 'broken.mov'}: broken.mov is not a readable video"
    )
    assert (tmp_path / "var" / "media" / "gallery" / "Holiday-clip.mp4").exists()
