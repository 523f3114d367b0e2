"""Video files the way the service keeps them: probed, and transcoded to H.264 MP4 with PyAV.

Every stored video is H.264 in MP4 (``yuv420p``, even dimensions, moov at the front), at a
constant frame rate, so browsers (and the SAM 2 demo's WebCodecs decoder) play it, and frame
``i`` of the file is frame ``i`` for the engine.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from segmentation.engines.frames import FrameSourceError, VideoFileFrames

POSTER_QUALITY = 85
TIME_TOLERANCE = 1e-3  # seconds: timestamps this close count as the same instant


class MediaError(ValueError):
    """The file is not a video the service can use."""


@dataclass(frozen=True)
class VideoInfo:
    width: int
    height: int
    fps: float
    frame_count: int
    duration: float  # seconds


def probe(path: Path, *, label: str | None = None) -> VideoInfo:
    """The video's geometry and length; :class:`MediaError` unless its first frame decodes.
    Messages call the file ``label`` (by default its name)."""
    label = label or path.name
    try:
        frames = VideoFileFrames(path, cache_bytes=1)
    except FrameSourceError as error:
        raise MediaError(str(error).replace(path.name, label, 1)) from None
    try:
        frames.frame(0)
        return VideoInfo(
            frames.width, frames.height, frames.fps, len(frames), len(frames) / frames.fps
        )
    except FrameSourceError as error:
        raise MediaError(str(error).replace(path.name, label, 1)) from None
    finally:
        frames.close()


def poster(path: Path, destination: Path) -> None:
    """Frame 0 of the video as a JPEG."""
    frames = VideoFileFrames(path, cache_bytes=1)
    try:
        image = cv2.cvtColor(np.asarray(frames.frame(0)), cv2.COLOR_RGB2BGR)
    finally:
        frames.close()
    ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, POSTER_QUALITY])
    if not ok:
        raise MediaError(f"{path.name}: cannot make a poster")
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_bytes(encoded.tobytes())


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Limits:
    """What an upload's header may claim: pixels a picture, and pixels a second."""

    max_pixels: int
    max_pixel_rate: int


# Opening a file the plain way, where the decoder cannot be told to skip frames, one at a time.
_PLAIN_OPENS = threading.Lock()


def header_check(source: Path, limits: Limits, *, label: str | None = None) -> None:
    """:class:`MediaError` if the video's header claims pictures or a pixel rate over
    ``limits``, or there is no readable video; no frame is decoded."""
    label = label or source.name
    try:
        container = _header_open(source)
    except (av.error.FFmpegError, OSError):
        raise MediaError(f"{label} is not a readable video") from None
    try:
        if not container.streams.video:
            raise MediaError(f"{label} has no video stream")
        _limits_check(container.streams.video[0], limits, label)
    finally:
        container.close()


def _header_open(source: Path) -> av.container.InputContainer:
    """The file opened for its header. Opening decodes a frame or two to learn the stream's
    parameters unless the decoder is told to skip them: the size and rate come from the headers
    and the parser alone (opening an 8K H.264 file took a process from 36 to 111 MB at its
    peak; skipping the frames, from 36 to 36). PyAV can
    tell only the streams a container names before it is probed; an MPEG program stream names
    its streams in its packets, so such a file is opened the plain way, which decodes on one
    thread (FFmpeg's rule for probing), and one file at a time."""
    try:
        return av.open(str(source), stream_options=[{"threads": "1", "skip_frame": "all"}])
    except av.error.FFmpegError:
        raise
    except ValueError:  # PyAV's: stream options for a format with no streams before probing
        with _PLAIN_OPENS:
            return av.open(str(source))


def _limits_check(stream: av.video.stream.VideoStream, limits: Limits, label: str) -> None:
    width, height = stream.codec_context.width, stream.codec_context.height
    if width * height > limits.max_pixels:
        raise MediaError(
            f"{label} is {width}x{height}: pictures of at most {limits.max_pixels:,} pixels "
            "are taken"
        )
    rate = stream.average_rate or stream.guessed_rate
    if rate and width * height * float(rate) > limits.max_pixel_rate:
        raise MediaError(
            f"{label} is {width}x{height} at {float(rate):g} frames a second: at most "
            f"{limits.max_pixel_rate:,} pixels a second are taken"
        )


def transcode(
    source: Path,
    destination: Path,
    *,
    fps: int = 24,
    max_side: int = 1280,
    start: float = 0.0,
    duration: float | None = None,
    label: str | None = None,
    limits: Limits | None = None,
    threads: int = 0,
    progress: Callable[[int], None] | None = None,
) -> VideoInfo:
    """Re-encode ``source`` as H.264 MP4 at ``fps``, its longest side at most ``max_side``,
    from ``start`` seconds for at most ``duration`` seconds. Frames are picked by timestamp, so
    the output keeps the source's timing whatever its frame rate. A source whose header claims
    more than ``limits`` is refused before any frame is decoded, and one whose frames turn out
    larger than ``limits`` (a stream may change its picture size midway) at the first such
    frame. The decoder and the encoder each use at most ``threads`` threads (0: as many as
    FFmpeg picks, one per core and one more, up to 16); each of the decoder's threads holds
    frames of its own (16 UHD uploads transcoded one at a time took the server from 172 MB to
    a peak of 344-366 MB on one thread each, 716-726 MB with the decoder on 16). Messages call
    the source ``label`` (by default its name); ``progress`` is told how many frames are
    written, after each."""
    label = label or source.name
    try:
        container = av.open(str(source))
    except (av.error.FFmpegError, OSError):
        raise MediaError(f"{label} is not a readable video") from None
    try:
        if not container.streams.video:
            raise MediaError(f"{label} has no video stream")
        stream = container.streams.video[0]
        if limits is not None:
            _limits_check(stream, limits, label)
        stream.thread_type = "AUTO"
        stream.codec_context.thread_count = threads
        written = _encode(
            container,
            stream,
            destination,
            fps,
            max_side,
            start,
            duration,
            limits,
            label,
            threads,
            progress,
        )
    except av.error.FFmpegError as error:
        destination.unlink(missing_ok=True)
        raise MediaError(f"{label} cannot be decoded ({_reason(error)})") from None
    except BaseException:
        destination.unlink(missing_ok=True)
        raise
    finally:
        container.close()
    if written == 0:
        destination.unlink(missing_ok=True)
        raise MediaError(f"{label} has no video frames in the chosen time range")
    return probe(destination)


def _encode(
    container: av.container.InputContainer,
    stream: av.video.stream.VideoStream,
    destination: Path,
    fps: int,
    max_side: int,
    start: float,
    duration: float | None,
    limits: Limits | None,
    label: str,
    threads: int,
    progress: Callable[[int], None] | None,
) -> int:
    width, height = stream.codec_context.width, stream.codec_context.height
    if not width or not height:
        raise MediaError("the video stream has no picture size")
    scale = min(1.0, max_side / max(width, height))
    out_width = max(2, int(width * scale) // 2 * 2)
    out_height = max(2, int(height * scale) // 2 * 2)
    end = math.inf if duration is None else start + duration
    rate = stream.average_rate or stream.guessed_rate or fps
    source_frame = 1.0 / float(rate)
    written = 0
    destination.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(destination), "w", format="mp4", options={"movflags": "faststart"}) as output:
        encoder = output.add_stream("libx264", rate=fps)
        encoder.width, encoder.height, encoder.pix_fmt = out_width, out_height, "yuv420p"
        # A key frame every second: the engine seeks often (propagating backward, any click).
        encoder.options = {
            "crf": "20",
            "preset": "veryfast",
            "g": str(fps),
            **({"threads": str(threads)} if threads else {}),
        }

        def emit_until(frame: av.VideoFrame, until: float) -> None:
            """Show ``frame`` at every output time before ``until`` (seconds from start)."""
            nonlocal written
            while start + written / fps < min(until, end) - TIME_TOLERANCE:
                picture = frame.reformat(width=out_width, height=out_height, format="yuv420p")
                picture.pts, picture.time_base = written, Fraction(1, fps)
                for packet in encoder.encode(picture):
                    output.mux(packet)
                written += 1
                if progress is not None:
                    progress(written)

        # Output frame n shows the last source frame at or before time start + n / fps.
        first_time = previous = previous_at = None
        for frame in container.decode(stream):
            if frame.time is None:
                continue
            if limits is not None and frame.width * frame.height > limits.max_pixels:
                raise MediaError(
                    f"{label} has a frame of {frame.width}x{frame.height} where its header says "
                    f"{width}x{height}: pictures of at most {limits.max_pixels:,} pixels are "
                    "taken"
                )
            if first_time is None:
                first_time = frame.time
            at = frame.time - first_time
            if at >= end:
                break
            if previous is not None:
                emit_until(previous, at)
            previous, previous_at = frame, at
        if previous is not None:
            emit_until(previous, previous_at + source_frame)
        for packet in encoder.encode():
            output.mux(packet)
    return written


def _reason(error: Exception) -> str:
    return getattr(error, "strerror", None) or type(error).__name__
