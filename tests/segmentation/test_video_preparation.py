"""An upload made into the stored format, frame for frame: frame ``i`` of the stored MP4 is at
``i / 24`` s (what the SAM 2 frontend computes from the time it plays) and is the frame the
server decodes as ``i``, for a constant-rate MP4 (remuxed), a variable-rate Matroska file and an
MPEG-TS file's 90 kHz clock (transcoded), each thousands of frames long at 64x48."""

from __future__ import annotations

import bisect
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from segmentation.engines.frames import VideoFileFrames
from segmentation.transcode import Limits, VideoInfo
from segmentation.video_preparation import frames_in_place, prepare, remux_suitable
from tests.segmentation.numbered_video import HEIGHT, WIDTH, decoded, index_shown, write_numbered

FRAMES = 3000
LIMITS = Limits(max_pixels=4096 * 2160, max_pixel_rate=4096 * 2160 * 60)


def prepared(source: Path, folder: Path, *, duration: float = 3600.0):
    return prepare(
        source=str(source),
        destination=str(folder / "out.mp4"),
        posters=str(folder / "posters"),
        fps=24,
        max_side=1280,
        start=0.0,
        duration=duration,
        limits=LIMITS,
        label=source.name,
        threads=1,
    )


def test_a_constant_rate_mp4_is_remuxed_frame_for_frame(tmp_path: Path) -> None:
    source = write_numbered(tmp_path / "cfr.mp4", [i / 24 for i in range(FRAMES)])

    result = prepared(source, tmp_path)

    assert result.remuxed is True
    assert result.info == VideoInfo(WIDTH, HEIGHT, 24.0, FRAMES, FRAMES / 24)
    frames = decoded(tmp_path / "out.mp4")
    assert [time for time, _ in frames] == [i / 24 for i in range(FRAMES)]
    assert [index for _, index in frames] == list(range(FRAMES))
    assert (tmp_path / "posters" / f"{result.sha256}.jpg").exists()


def test_a_variable_rate_file_in_milliseconds_is_transcoded_to_a_constant_rate(
    tmp_path: Path,
) -> None:
    # frames 1/50 to 1/15 s apart, in Matroska's 1 ms time base
    gaps = np.random.default_rng(1).choice([1 / 30, 1 / 15, 1 / 50, 1 / 24], size=FRAMES)
    times = [0.0, *np.cumsum(gaps)[:-1].tolist()]
    source = write_numbered(
        tmp_path / "vfr.mkv", times, container_format="matroska", time_base=Fraction(1, 1000)
    )
    assert not remux_suitable(source, fps=24, max_side=1280, duration=3600, limits=LIMITS)

    result = prepared(source, tmp_path)

    # output frame n shows the last source frame at or before n / 24 s (as Matroska rounds it)
    shown_at = [round(at * 1000) / 1000 for at in times]
    expected = [
        bisect.bisect_right(shown_at, n / 24 + 1e-3) - 1 for n in range(result.info.frame_count)
    ]
    frames = decoded(tmp_path / "out.mp4")
    assert result.remuxed is False
    assert result.info.frame_count == len(frames) == frames_in_place(tmp_path / "out.mp4", fps=24)
    assert [time for time, _ in frames] == [n / 24 for n in range(len(frames))]
    assert [index for _, index in frames] == expected


def test_an_mpeg_ts_clock_at_30_frames_a_second_is_transcoded_to_24(tmp_path: Path) -> None:
    source = write_numbered(
        tmp_path / "30.ts",
        [i / 30 for i in range(FRAMES)],
        container_format="mpegts",
        time_base=Fraction(1, 90000),
        rate=30,
    )

    result = prepared(source, tmp_path)

    frames = decoded(tmp_path / "out.mp4")
    assert (result.remuxed, result.info.frame_count, len(frames)) == (False, 2400, 2400)
    assert [index for _, index in frames] == [n * 30 // 24 for n in range(2400)]


def test_the_server_decodes_frame_i_as_the_browser_plays_it(tmp_path: Path) -> None:
    # the engines and the frame images read frames by index (engines/frames.py)
    source = write_numbered(tmp_path / "cfr.mp4", [i / 24 for i in range(FRAMES)])
    prepared(source, tmp_path)

    frames = VideoFileFrames(tmp_path / "out.mp4")
    try:
        picked = [0, 1, 1234, FRAMES - 2, FRAMES - 1, 17, 2999, 5]  # seeks back and forth
        assert len(frames) == FRAMES
        assert [index_shown(np.asarray(frames.frame(i))) for i in picked] == picked
    finally:
        frames.close()


@pytest.mark.parametrize(
    ("duration", "options", "times", "frame_count"),
    [
        (10.0, {}, [i / 24 for i in range(480)], 240),  # cut to the length allowed
        (3600.0, {"gop": 240}, [i / 24 for i in range(480)], 480),  # key frames 10 s apart
        (3600.0, {"rate": 25}, [i / 25 for i in range(480)], 461),  # another rate
    ],
    ids=["cut", "key-frames-far-apart", "25-fps"],
)
def test_what_is_not_kept_as_it_is_is_transcoded(
    tmp_path: Path, duration: float, options: dict, times: list[float], frame_count: int
) -> None:
    source = write_numbered(tmp_path / "in.mp4", times, **options)

    result = prepared(source, tmp_path, duration=duration)

    assert (result.remuxed, result.info.frame_count) == (False, frame_count)
