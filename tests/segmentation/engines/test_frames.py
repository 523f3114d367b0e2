from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from segmentation.engines.frames import FrameSourceError, ImageFolderFrames, VideoFileFrames
from tests.segmentation.synthetic import HEIGHT, WIDTH, Video, write_davis


def test_video_file_reports_its_frames(frames: VideoFileFrames) -> None:
    assert (len(frames), frames.width, frames.height, frames.fps) == (12, WIDTH, HEIGHT, 24.0)
    assert frames.frame(0).shape == (HEIGHT, WIDTH, 3)
    assert frames.frame(0).dtype == np.uint8


def test_video_file_frames_are_the_encoded_pictures(frames: VideoFileFrames, video: Video) -> None:
    # given a lossy encode at high quality, every decoded frame is close to its source
    errors = [np.abs(frames.frame(i).astype(int) - video.frames[i]).mean() for i in range(12)]

    assert max(errors) < 6.0
    # and frames are in presentation order: each is nearer its own source than its neighbour's
    for index in range(1, 12):
        assert (
            errors[index] < np.abs(frames.frame(index).astype(int) - video.frames[index - 1]).mean()
        )


def test_random_access_gives_the_same_pixels_as_playing_forward(video_file: Path) -> None:
    # given every frame decoded in order (B-frames and a key frame every 5 frames)
    forward = VideoFileFrames(video_file)
    expected = [forward.frame(i).copy() for i in range(len(forward))]
    forward.close()
    # when frames are asked for out of order, across key frames, with a tiny cache
    jumping = VideoFileFrames(video_file, cache_bytes=1)
    order = [7, 3, 11, 0, 5, 6, 2, 10, 1, 9, 4, 8]

    # then each is exactly the frame decoded in order
    for index in order:
        assert np.array_equal(jumping.frame(index), expected[index]), index
    jumping.close()


def test_cache_stays_within_its_bound(video_file: Path) -> None:
    frame_bytes = WIDTH * HEIGHT * 3
    source = VideoFileFrames(video_file, cache_bytes=3 * frame_bytes)

    for index in range(len(source)):
        source.frame(index)

    assert source._cached_bytes <= 3 * frame_bytes
    assert sorted(source._cache) == [9, 10, 11]
    source.close()


def test_frames_are_read_only(frames: VideoFileFrames) -> None:
    with pytest.raises(ValueError, match="read-only"):
        frames.frame(0)[0, 0, 0] = 1


def test_frame_index_out_of_range(frames: VideoFileFrames) -> None:
    with pytest.raises(IndexError, match=r"^frame index 12 is outside 0\.\.11$"):
        frames.frame(12)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is not a readable video (Invalid data found when processing input)"),
        (
            b"<html><body>not a video</body></html>" * 20,
            "is not a readable video (Invalid data found when processing input)",
        ),
    ],
)
def test_unreadable_video_is_a_clear_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "upload.mp4"
    path.write_bytes(content)

    with pytest.raises(FrameSourceError) as raised:
        VideoFileFrames(path)

    assert str(raised.value) == f"upload.mp4 {message}"


def test_truncated_video_is_a_clear_error(video_file: Path, tmp_path: Path) -> None:
    # given the first half of an MP4 whose index (moov) is written at its end
    data = video_file.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])

    with pytest.raises(FrameSourceError) as raised:
        VideoFileFrames(cut)

    # the reason is FFmpeg's, without the path of the file on the server
    assert (
        str(raised.value)
        == "cut.mp4 is not a readable video (Invalid data found when processing input)"
    )


def test_image_folder_frames_in_name_order(video: Video, tmp_path: Path) -> None:
    # given lossless PNG frames, written out of order
    for index in reversed(range(12)):
        bgr = cv2.cvtColor(video.frames[index], cv2.COLOR_RGB2BGR)
        cv2.imwrite(str(tmp_path / f"{index:05d}.png"), bgr)
    (tmp_path / "notes.txt").write_text("not a frame")

    source = ImageFolderFrames(tmp_path)

    assert (len(source), source.width, source.height) == (12, WIDTH, HEIGHT)
    for index in range(12):
        assert np.array_equal(source.frame(index), video.frames[index])


def test_davis_jpeg_folder(video: Video, tmp_path: Path) -> None:
    folder = write_davis(video, tmp_path / "seq") / "JPEGImages"

    source = ImageFolderFrames(folder)

    assert len(source) == 12
    assert np.abs(source.frame(3).astype(int) - video.frames[3]).mean() < 6.0


def test_image_folder_without_images(tmp_path: Path) -> None:
    with pytest.raises(FrameSourceError, match=r"holds no JPEG or PNG frames$"):
        ImageFolderFrames(tmp_path)
