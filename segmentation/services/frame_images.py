"""The frames of a library video as JPEG files, for pages that show a video frame by frame.

A page that draws masks over frames must show exactly the frames the engine segments. Browsers'
own decoders may number frames differently (edit lists, B-frame delays, variable frame rates)
and the SAM 2 demo's WebCodecs decoding needs a secure context, so the frames are decoded here,
by the same frame source the sessions use, and written once as JPEG files under
``FRAME_IMAGE_DIR/<sha256 of the video>/<index>.jpg``. Decoders stay open for the few most
recently used videos (each safe to share between threads), so a page stepping through a video
costs one decode per frame.
"""

from __future__ import annotations

import os
import shutil
import threading
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

_decoders: OrderedDict[str, VideoFileFrames] = OrderedDict()
_decoders_guard = threading.Lock()


def frame_image_get(*, path: str, frame_index: int) -> Path:
    """The JPEG file of frame ``frame_index`` of the library's video at ``path``."""
    video = video_get(path=path)
    if not 0 <= frame_index < video.frame_count:
        raise BadUserInput(
            f"frame index {frame_index} is outside the video's frames 0..{video.frame_count - 1}"
        )
    file = _image_path(video, frame_index)
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
