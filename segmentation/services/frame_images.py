"""The frames of a library video as JPEG files, for pages that show a video frame by frame.

A page that draws masks over frames must show exactly the frames the engine segments. Browsers'
own decoders may number frames differently (edit lists, B-frame delays, variable frame rates)
and the SAM 2 demo's WebCodecs decoding needs a secure context, so the frames are decoded here,
by the same frame source the sessions use, and written once as JPEG files under
``FRAME_IMAGE_DIR/<sha256 of the video>/<index>.jpg``. Decoders stay open for the few most
recently used videos (each safe to share between threads), so a page stepping through a video
costs one decode per frame.

The files are a cache, and they take at most ``FRAME_IMAGE_QUOTA_MB`` (the drawn default
video's 144 frames at 854x480 take 8.7 MB): before a frame is written that would take them
over it, the folders of the videos least recently used are deleted whole, to be made again if
asked for. A video whose frames this process served in the last ``IN_USE_SEC`` seconds, or
whose folder had a file written in that time, is never deleted (a page may be stepping through it,
and the file just handed to a request must still be there), so while more than the quota is
in use the quota is exceeded by those folders alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path

import cv2
from django.conf import settings

from segmentation.engines.frames import FrameSourceError, VideoFileFrames
from segmentation.errors import BadUserInput, UnsupportedMedia
from segmentation.models import Video
from segmentation.selectors import video_get
from segmentation.services.videos import media_path

OPEN_DECODERS = 4
DECODER_CACHE_BYTES = 32 * 1024 * 1024

IN_USE_SEC = 60
RECOUNT_SEC = 5  # over the quota with every folder in use: count the files again this often

_decoders: OrderedDict[str, VideoFileFrames] = OrderedDict()
_decoders_guard = threading.Lock()

_room_guard = threading.Lock()
_kept_bytes: dict[Path, int] = {}  # FRAME_IMAGE_DIR -> bytes under it, as this process counts
_counted_at: dict[Path, float] = {}  # FRAME_IMAGE_DIR -> when its files were last counted
_served_at: dict[str, float] = {}  # sha256 -> when this process last served one of its frames


def frame_image_get(*, path: str, frame_index: int) -> Path:
    """The JPEG file of frame ``frame_index`` of the library's video at ``path``."""
    video = video_get(path=path)
    if not 0 <= frame_index < video.frame_count:
        raise BadUserInput(
            f"frame index {frame_index} is outside the video's frames 0..{video.frame_count - 1}"
        )
    file = _image_path(video, frame_index)
    _served_at[video.sha256] = time.time()
    if file.exists():
        return file
    try:
        image = _decoder(video).frame(frame_index)
    except (FrameSourceError, IndexError) as error:
        raise UnsupportedMedia(str(error)) from None
    ok, encoded = cv2.imencode(
        ".jpg",
        cv2.cvtColor(image, cv2.COLOR_RGB2BGR),
        [cv2.IMWRITE_JPEG_QUALITY, settings.FRAME_IMAGE_QUALITY],
    )
    if not ok:
        raise UnsupportedMedia(f"frame {frame_index} of {video.path} cannot be encoded as JPEG")
    _room_make(adding=len(encoded))
    file.parent.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed: a reader never sees half a file, and racing writers agree.
    partial = file.with_name(f".{uuid.uuid4().hex}.partial")
    partial.write_bytes(encoded.tobytes())
    os.replace(partial, file)
    return file


def frame_images_delete(*, sha256: str) -> None:
    """Forget the frame images of a video's content, unless another video still has it."""
    if Video.objects.filter(sha256=sha256).exists():
        return
    with _decoders_guard:
        for key in [k for k in _decoders if k.endswith(f"@{sha256}")]:
            del _decoders[key]
    shutil.rmtree(Path(settings.FRAME_IMAGE_DIR) / sha256, ignore_errors=True)


def _room_make(*, adding: int) -> None:
    """Delete the folders of the videos least recently used until ``adding`` bytes more fit in
    ``FRAME_IMAGE_QUOTA_MB``, but those in use; count the bytes as kept."""
    root = Path(settings.FRAME_IMAGE_DIR)
    quota = settings.FRAME_IMAGE_QUOTA_BYTES
    with _room_guard:
        kept = _kept_bytes.get(root)
        now = time.time()
        # The count is this process's; other processes' files (and deletions) show at a recount.
        if kept is None or (
            kept + adding > quota and now - _counted_at.get(root, 0) >= RECOUNT_SEC
        ):
            folders = _folders(root)
            _counted_at[root] = now
            kept = sum(size for size, _ in folders.values())
            for sha256, (size, used_at) in sorted(folders.items(), key=lambda item: item[1][1]):
                if kept + adding <= quota or now - used_at < IN_USE_SEC:
                    break
                shutil.rmtree(root / sha256, ignore_errors=True)
                _served_at.pop(sha256, None)
                kept -= size
        _kept_bytes[root] = kept + adding


def _folders(root: Path) -> dict[str, tuple[int, float]]:
    """Each video's folder under ``root``: the bytes of its files and when it was last used
    (a file written there, or a frame of it served by this process)."""
    folders = {}
    for folder in root.iterdir() if root.is_dir() else ():
        if not folder.is_dir():
            continue
        size, used_at = 0, _served_at.get(folder.name, 0.0)
        for entry in os.scandir(folder):
            with contextlib.suppress(FileNotFoundError):  # a partial file renamed meanwhile
                stat = entry.stat()
                size += stat.st_size
                used_at = max(used_at, stat.st_mtime)
        folders[folder.name] = (size, used_at)
    return folders


def _image_path(video: Video, frame_index: int) -> Path:
    return Path(settings.FRAME_IMAGE_DIR) / video.sha256 / f"{frame_index:05d}.jpg"


def _decoder(video: Video) -> VideoFileFrames:
    key = f"{video.path}@{video.sha256}"
    with _decoders_guard:
        decoder = _decoders.get(key)
        if decoder is not None:
            _decoders.move_to_end(key)
            return decoder
    try:
        decoder = VideoFileFrames(media_path(video.path), cache_bytes=DECODER_CACHE_BYTES)
    except FrameSourceError as error:
        raise UnsupportedMedia(str(error)) from None
    with _decoders_guard:
        # A decoder dropped here may still be in use by another request: it is not closed, and
        # its file closes when the last user lets go of it.
        decoder = _decoders.setdefault(key, decoder)
        while len(_decoders) > OPEN_DECODERS:
            _decoders.popitem(last=False)
    return decoder
