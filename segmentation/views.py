"""The files behind ``Video.url`` and ``Video.posterUrl``: media served with byte ranges.

Browsers' video elements seek with ``Range`` requests, which Django's own file responses do
not answer; a single range is answered here with 206, anything else with the whole file.
"""

from __future__ import annotations

import mimetypes
import re
from pathlib import Path

from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_safe

SINGLE_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
CHUNK = 256 * 1024


@require_safe
def media_file(request: HttpRequest, path: str) -> HttpResponse:
    root = Path(settings.MEDIA_ROOT).resolve()
    file = (root / path).resolve()
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
    """The inclusive byte range asked for, "unsatisfiable", or None for the whole file."""
    match = SINGLE_RANGE.match(header.strip())
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":  # the last N bytes
        start, end = max(size - int(last), 0), size - 1
    else:
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    if start >= size or start > end:
        return "unsatisfiable"
    return start, end


def _read(file: Path, start: int, length: int):
    with file.open("rb") as handle:
        handle.seek(start)
        while length > 0:
            block = handle.read(min(CHUNK, length))
            if not block:
                return
            length -= len(block)
            yield block
