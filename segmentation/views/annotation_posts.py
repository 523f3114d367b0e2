"""Annotation files posted to the views (the exports and the import): read no further than a
byte past their cap, parsed with bounded memory, and their work run by a thread of its own that
says in the log when it stopped because its client went away (``core/threads.py``'s
``call_in_thread``), without holding the event loop or the thread that runs sync views.

Their cap holds at the server too, while a body arrives (``ANNOTATIONS_BODY_CAP``, which
``apps.py`` registers with the HTTP edge)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.http import HttpRequest

from core.edge_registry import BodyCap
from core.threads import Stopped
from segmentation.annotation_json import annotations_parse, annotations_too_large
from segmentation.models import Video
from segmentation.services.uploads import annotations_video

logger = logging.getLogger(__name__)

Result = TypeVar("Result")

# The paths whose body is an annotation file (urls.py): the exports and the import.
ANNOTATION_PATHS = re.compile(
    r"/annotations/(?:coco\.json|yolo\.zip|masks\.zip)|/sessions/[^/]+/annotations"
)


def annotations_body_refusal(size: int) -> dict[str, Any]:
    """The JSON of the server's refusal of an annotation file of ``size`` bytes, over the cap
    while it arrives: the views' own error (``responses.py``)."""
    error = annotations_too_large(size=size, max_bytes=settings.MAX_ANNOTATIONS_BYTES)
    return {"error": error.message, "code": error.code.value}


ANNOTATIONS_BODY_CAP = BodyCap(
    paths=ANNOTATION_PATHS,
    max_bytes=lambda: settings.MAX_ANNOTATIONS_BYTES,
    refusal=annotations_body_refusal,
)


def annotation_body(request: HttpRequest) -> bytes:
    """The request's body, an annotation file: read no further than a byte past the cap (a
    longer one is refused by its length alone, :func:`annotations_parse`)."""
    return request.read(settings.MAX_ANNOTATIONS_BYTES + 1)


def annotation_parsed(body: bytes) -> tuple[object, Video]:
    """The annotation file, parsed with bounded memory, and the video it is of (looked up here,
    in the thread of sync views: the work's own thread reads no database)."""
    data = annotations_parse(body, max_bytes=settings.MAX_ANNOTATIONS_BYTES)
    return data, annotations_video(data)


def stoppable(request: HttpRequest, work: Callable[[], Result]) -> Callable[[], Result]:
    """``work`` as its own thread runs it, saying in the log when it stopped because its
    client went away."""

    def run() -> Result:
        try:
            return work()
        except Stopped:
            logger.info("%s stopped: the client went away", request.path)
            raise

    return run
