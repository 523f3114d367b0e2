"""The library's files over HTTP: the media files behind ``Video.url`` and ``Video.posterUrl``,
and a video's frames as images.

- ``/media/...``: browsers' video elements seek with ``Range`` requests, which Django's own file
  responses do not answer; a single range is answered here with 206, anything else with the
  whole file.
- ``/frames/<index>.jpg?video=<path>``: a frame exactly as the engine sees it.
"""

from __future__ import annotations

import mimetypes
import re
from pathlib import Path

from django.conf import settings
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    StreamingHttpResponse,
)
from django.views.decorators.http import require_safe

from segmentation.errors import SegmentationError
from segmentation.services.frame_images import frame_image_get
from segmentation.views.responses import refusal

SINGLE_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
CHUNK = 256 * 1024
POSITION_DIGITS = 18  # a byte position of more digits is beyond any file
BEYOND_ANY_FILE = 10**POSITION_DIGITS


@require_safe
def media_file(request: HttpRequest, path: str) -> HttpResponse:
    root = Path(settings.MEDIA_ROOT).resolve()
    try:
        file = (root / path).resolve()
    except ValueError:  # a NUL byte, which no file name holds
        raise Http404("no such file") from None
    if not file.is_relative_to(root) or not file.is_file() or file.name.startswith("."):
        raise Http404("no such file")
    size = file.stat().st_size
    content_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    wanted = _range(request.headers.get("Range", ""), size)
    if wanted is None:
        response: HttpResponse = FileResponse(file.open("rb"), content_type=content_type)
    elif wanted == "unsatisfiable":
        response = HttpResponse(status=416, headers={"Content-Range": f"bytes */{size}"})
    else:
        start, end = wanted
        response = StreamingHttpResponse(
            _read(file, start, end - start + 1), status=206, content_type=content_type
        )
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Content-Length"] = str(end - start + 1)
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "public, max-age=3600"
    return response


def _range(header: str, size: int) -> tuple[int, int] | str | None:
    """The inclusive byte range asked for, "unsatisfiable", or None for the whole file.

    A position of more digits than any file's size has is taken as past every file (Python
    refuses to read an integer of over 4,300 digits, and one of 5,000 was a 500): a first byte
    there is unsatisfiable, a last byte or a suffix there means to the end."""
    match = SINGLE_RANGE.match(header.strip())
    if match is None or match.groups() == ("", ""):
        return None
    first, last = (_position(digits) for digits in match.groups())
    if first is None:  # the last N bytes
        start, end = max(size - last, 0), size - 1
    else:
        start = first
        end = min(last, size - 1) if last is not None else size - 1
    if start >= size or start > end:
        return "unsatisfiable"
    return start, end


def _position(digits: str) -> int | None:
    if not digits:
        return None
    return int(digits) if len(digits) <= POSITION_DIGITS else BEYOND_ANY_FILE


def _read(file: Path, start: int, length: int):
    with file.open("rb") as handle:
        handle.seek(start)
        while length > 0:
            block = handle.read(min(CHUNK, length))
            if not block:
                return
            length -= len(block)
            yield block


@require_safe
def frame_image(request: HttpRequest, frame_index: int) -> HttpResponse:
    """``GET /frames/<index>.jpg?video=<path>``: a frame of a library video, exactly as the
    engine sees it, as JPEG."""
    try:
        file = frame_image_get(path=request.GET.get("video", ""), frame_index=frame_index)
    except SegmentationError as error:
        return refusal(error)
    response = HttpResponse(file.read_bytes(), content_type="image/jpeg")
    # A path names one video for good (uploads get new paths), so its frames never change.
    response["Cache-Control"] = "public, max-age=86400"
    return response
