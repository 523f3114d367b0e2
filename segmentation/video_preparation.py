"""An upload made into the stored format, the work of a child process (``core/processes.py``):
kept as it is, remuxed, when it is already what the service stores, else transcoded
(``transcode.py``); its poster drawn and its digest taken; its progress reported as it goes.

Remuxing copies the video's packets into a new MP4 without decoding them: an hour of
854x480 H.264 is remuxed in seconds, where re-encoding it took about 25 minutes on 2 cores. An
upload is kept this way only when every frame would be where a transcode puts it: H.264
``yuv420p`` in MP4 or QuickTime, even sides within ``max_side``, no cut asked for (the whole
video within the length allowed), a key frame at least every :data:`REMUX_MAX_KEY_INTERVAL_SEC`
(the engine and the frame images seek), and frames at exactly the stored rate, frame ``i`` at
``i / fps`` from the first. The copy is checked the same way once written; anything else, or a
copy that fails its check, is transcoded.

No Django here: the child imports only this and what it needs.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av

from core.processes import progress_report
from segmentation.transcode import (
    Limits,
    VideoInfo,
    poster,
    probe,
    sha256_of,
    transcode,
)

REMUX_MAX_KEY_INTERVAL_SEC = 5
PROGRESS_EVERY_SEC = 0.5  # how often the child tells the server how far it has come
REMUX_FORMATS = {"mov", "mp4"}


@dataclass(frozen=True)
class Prepared:
    info: VideoInfo
    sha256: str
    remuxed: bool


@dataclass(frozen=True)
class Progress:
    """How far a preparation has come: ``done`` of about ``total`` frames."""

    done: int
    total: int


def prepare(
    *,
    source: str,
    destination: str,
    posters: str,
    fps: int,
    max_side: int,
    start: float,
    duration: float,
    limits: Limits,
    label: str,
    threads: int,
) -> Prepared:
    """``source`` made into the stored format at ``destination`` (remuxed when it already is
    that, else transcoded from ``start`` for at most ``duration`` seconds), its poster written
    as ``<posters>/<sha256>.jpg``; :class:`MediaError` when it cannot be. Progress goes to the
    caller as :class:`Progress` (:func:`core.processes.progress_report`)."""
    source_path, destination_path = Path(source), Path(destination)
    reporter = _Reporter()
    remuxed = False
    if start == 0 and remux_suitable(
        source_path, fps=fps, max_side=max_side, duration=duration, limits=limits
    ):
        remux(source_path, destination_path, report=reporter.report)
        remuxed = frames_in_place(destination_path, fps=fps) is not None
    if not remuxed:
        total = _expected_frames(source_path, fps=fps, start=start, duration=duration)
        transcode(
            source_path,
            destination_path,
            fps=fps,
            max_side=max_side,
            start=start,
            duration=duration,
            label=label,
            limits=limits,
            threads=threads,
            progress=lambda written: reporter.report(written, total),
        )
    info = probe(destination_path)
    digest = sha256_of(destination_path)
    poster_path = Path(posters) / f"{digest}.jpg"
    if not poster_path.exists():
        poster(destination_path, poster_path)
    reporter.report(info.frame_count, info.frame_count, force=True)
    return Prepared(info=info, sha256=digest, remuxed=remuxed)


def remux_suitable(path: Path, *, fps: int, max_side: int, duration: float, limits: Limits) -> bool:
    """Whether ``path`` may be kept by remuxing (the module's conditions), read from its
    packets without decoding any."""
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError):
        return False
    try:
        if not REMUX_FORMATS & set(container.format.name.split(",")):
            return False
        if not container.streams.video:
            return False
        stream = container.streams.video[0]
        context = stream.codec_context
        width, height = context.width, context.height
        if (
            context.name != "h264"
            or context.pix_fmt != "yuv420p"
            or width % 2
            or height % 2
            or max(width, height) > max_side
            or width * height > limits.max_pixels
            or width * height * fps > limits.max_pixel_rate
        ):
            return False
        count = _frames_in_place(container, stream, fps=fps)
    except av.error.FFmpegError:
        return False
    finally:
        container.close()
    return count is not None and count / fps <= duration


def frames_in_place(path: Path, *, fps: int) -> int | None:
    """How many frames ``path`` holds if frame ``i`` is at ``i / fps`` from the first, with
    key frames close enough to seek to; else None."""
    with av.open(str(path)) as container:
        if not container.streams.video:
            return None
        return _frames_in_place(container, container.streams.video[0], fps=fps)


def _frames_in_place(
    container: av.container.InputContainer, stream: av.video.stream.VideoStream, *, fps: int
) -> int | None:
    if stream.time_base is None:
        return None
    step = Fraction(1, fps) / stream.time_base  # a frame's duration in the stream's ticks
    if step.denominator != 1:
        return None
    timestamps: list[int] = []
    keys: list[int] = []
    for packet in container.demux(stream):
        if packet.size == 0:
            continue
        if packet.pts is None:
            return None
        timestamps.append(packet.pts)
        if packet.is_keyframe:
            keys.append(packet.pts)
    if not timestamps or not keys:
        return None
    timestamps.sort()
    first = timestamps[0]
    if any(pts != first + index * step for index, pts in enumerate(timestamps)):
        return None
    keys.sort()
    if keys[0] != first:
        return None
    edges = [*keys, timestamps[-1] + step]
    longest = max(later - earlier for earlier, later in itertools.pairwise(edges))
    if longest * stream.time_base > REMUX_MAX_KEY_INTERVAL_SEC:
        return None
    return len(timestamps)


def remux(source: Path, destination: Path, *, report: Callable[[int, int], None]) -> None:
    """The video stream of ``source`` copied into an MP4 at ``destination`` (moov at the front),
    its timestamps shifted to start at 0."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(source)) as container:
        stream = container.streams.video[0]
        total = stream.frames or 0
        with av.open(
            str(destination), "w", format="mp4", options={"movflags": "faststart"}
        ) as output:
            copy = output.add_stream_from_template(stream)
            first: int | None = None
            copied = 0
            for packet in container.demux(stream):
                if packet.size == 0:
                    continue
                if first is None:
                    first = packet.pts
                packet.pts -= first
                if packet.dts is not None:
                    packet.dts -= first
                packet.stream = copy
                output.mux(packet)
                copied += 1
                report(copied, max(total, copied))


class _Reporter:
    """Progress sent at most every :data:`PROGRESS_EVERY_SEC`."""

    def __init__(self) -> None:
        self._next = 0.0

    def report(self, done: int, total: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now >= self._next:
            self._next = now + PROGRESS_EVERY_SEC
            progress_report(Progress(done=done, total=max(total, done)))


def _expected_frames(path: Path, *, fps: int, start: float, duration: float) -> int:
    """About how many frames a transcode of ``path`` writes (for progress; 0: unknown)."""
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            if stream.duration is not None and stream.time_base is not None:
                length = float(stream.duration * stream.time_base)
            elif container.duration is not None:
                length = container.duration / av.time_base
            else:
                return 0
    except (av.error.FFmpegError, OSError, IndexError):
        return 0
    return max(0, round(min(length - start, duration) * fps))
