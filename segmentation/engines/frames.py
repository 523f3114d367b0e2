"""Frame sources: the frames of one video, decoded on demand and kept in a bounded cache.

Engines read frames only through :class:`FrameSource`, as ``H x W x 3`` uint8 RGB arrays, so a
long video never has to sit in memory whole. Two sources exist: a video file decoded with PyAV,
and a folder of JPEG/PNG frames (the DAVIS layout) used for evaluation.
"""

from __future__ import annotations

import abc
import bisect
import threading
from collections import OrderedDict
from pathlib import Path

import av
import cv2
import numpy as np

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024


class FrameSourceError(ValueError):
    """The video or folder cannot be read as frames."""


class FrameSource(abc.ABC):
    """Random access to a video's frames; safe to share between threads."""

    width: int
    height: int
    fps: float

    def __init__(self, *, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cache_bytes = cache_bytes
        self._cached_bytes = 0
        self._lock = threading.RLock()

    @abc.abstractmethod
    def __len__(self) -> int: ...

    def frame(self, index: int) -> np.ndarray:
        """Frame ``index`` as a read-only ``H x W x 3`` uint8 RGB array."""
        if not 0 <= index < len(self):
            raise IndexError(f"frame index {index} is outside 0..{len(self) - 1}")
        with self._lock:
            cached = self._cache.get(index)
            if cached is not None:
                self._cache.move_to_end(index)
                return cached
            return self._decode(index)

    @abc.abstractmethod
    def _decode(self, index: int) -> np.ndarray:
        """Decode frame ``index`` (and maybe its neighbours), :meth:`_keep` them, return it."""

    def _keep(self, index: int, image: np.ndarray) -> np.ndarray:
        image.setflags(write=False)
        if index not in self._cache:
            self._cache[index] = image
            self._cached_bytes += image.nbytes
        while self._cached_bytes > self._cache_bytes and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            self._cached_bytes -= dropped.nbytes
        return image

    def close(self) -> None:
        with self._lock:
            self._cache.clear()
            self._cached_bytes = 0


class ImageFolderFrames(FrameSource):
    """The JPEG/PNG files of a folder, in name order, as frames."""

    def __init__(self, folder: Path, *, fps: float = 24.0, **kwargs: int) -> None:
        super().__init__(**kwargs)
        self._paths = sorted(
            p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES
        )
        if not self._paths:
            raise FrameSourceError(f"{folder} holds no JPEG or PNG frames")
        first = self.frame(0)
        self.height, self.width = first.shape[:2]
        self.fps = fps

    def __len__(self) -> int:
        return len(self._paths)

    def _decode(self, index: int) -> np.ndarray:
        image = cv2.imread(str(self._paths[index]), cv2.IMREAD_COLOR)
        if image is None:
            raise FrameSourceError(f"cannot read the image {self._paths[index]}")
        if getattr(self, "height", None) is not None and image.shape[:2] != (
            self.height,
            self.width,
        ):
            raise FrameSourceError(f"{self._paths[index]} differs in size from the first frame")
        return self._keep(index, cv2.cvtColor(image, cv2.COLOR_BGR2RGB))


class VideoFileFrames(FrameSource):
    """The frames of a video file, decoded with PyAV.

    Opening demuxes the file once, without decoding, to learn every frame's timestamp and where
    the key frames are. A frame is then decoded from the nearest key frame at or before it, or by
    decoding on from the last frame when that is nearer, so playing forward costs one decode per
    frame. Frames are numbered in presentation order.
    """

    # Decoding on from the current position beats seeking when the target is this close.
    READ_AHEAD_FRAMES = 48

    def __init__(self, path: Path, **kwargs: int) -> None:
        super().__init__(**kwargs)
        self._path = Path(path)
        try:
            self._container = av.open(str(self._path))
        except (av.error.FFmpegError, OSError) as error:
            raise FrameSourceError(
                f"{self._path.name} is not a readable video ({_reason(error)})"
            ) from None
        if not self._container.streams.video:
            self._container.close()
            raise FrameSourceError(f"{self._path.name} has no video stream")
        self._stream = self._container.streams.video[0]
        self._stream.thread_type = "AUTO"
        try:
            self._timestamps, self._keyframes = self._index()
        except av.error.FFmpegError as error:
            self._container.close()
            raise FrameSourceError(f"{self._path.name} cannot be read ({_reason(error)})") from None
        if not self._timestamps:
            self._container.close()
            raise FrameSourceError(f"{self._path.name} has no video frames")
        self.width = self._stream.codec_context.width
        self.height = self._stream.codec_context.height
        rate = self._stream.average_rate or self._stream.guessed_rate
        self.fps = float(rate) if rate else 24.0
        self._position = -1  # index of the last frame the decoder produced
        self._frames = None

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def path(self) -> Path:
        return self._path

    def _index(self) -> tuple[list[int], list[int]]:
        timestamps, keyframes = [], []
        for packet in self._container.demux(self._stream):
            if packet.size == 0:
                continue
            pts = packet.pts if packet.pts is not None else packet.dts
            if pts is None:
                pts = len(timestamps)
            timestamps.append(pts)
            if packet.is_keyframe:
                keyframes.append(pts)
        timestamps.sort()
        keyframes.sort()
        return timestamps, keyframes or timestamps[:1]

    def _decode(self, index: int) -> np.ndarray:
        target = self._timestamps[index]
        ahead = (
            self._frames is not None
            and 0 <= self._position < index <= self._position + self.READ_AHEAD_FRAMES
        )
        if not ahead or self._keyframe_before(target) > self._timestamps[self._position]:
            self._seek(target)
        try:
            for frame in self._frames:
                position = self._position = self._frame_index(frame)
                if position >= index - self.READ_AHEAD_FRAMES:
                    image = self._keep(position, frame.to_ndarray(format="rgb24"))
                    if position >= index:
                        return image
        except av.error.FFmpegError as error:
            self._frames = None
            message = f"{self._path.name}: frame {index} cannot be decoded ({_reason(error)})"
            raise FrameSourceError(message) from None
        self._frames = None
        raise FrameSourceError(f"{self._path.name} ended before frame {index}")

    def _keyframe_before(self, pts: int) -> int:
        return self._keyframes[max(bisect.bisect_right(self._keyframes, pts) - 1, 0)]

    def _seek(self, target: int) -> None:
        self._container.seek(self._keyframe_before(target), stream=self._stream, backward=True)
        self._frames = self._container.decode(self._stream)
        self._position = -1

    def _frame_index(self, frame: av.VideoFrame) -> int:
        pts = frame.pts if frame.pts is not None else frame.dts
        if pts is None:
            return self._position + 1
        return min(bisect.bisect_left(self._timestamps, pts), len(self) - 1)

    def close(self) -> None:
        with self._lock:
            super().close()
            self._frames = None
            self._container.close()


def _reason(error: Exception) -> str:
    """FFmpeg's reason, without the file's path on this server."""
    return getattr(error, "strerror", None) or type(error).__name__
