"""Annotation files read with bounded memory: checked before they are parsed, so that what the
parse builds is bounded too.

Python's parser builds an object for every value it reads, and a small value costs far more than
its text: 73 MB of ``{}`` took 1.7 GB (issue 47). So a file is refused, before any of it is
parsed, when it is longer than ``MAX_ANNOTATIONS_MB`` (``UPLOAD_TOO_LARGE``) or when it may hold
more than :data:`MAX_VALUES` values (``BAD_USER_INPUT``). The values are counted from the text at
C speed: every value but the first follows a comma or opens a container, so commas and opening
brackets together bound them (from above: brackets and commas inside strings count too; a mask's
RLE holds a ``[`` in about 1 character in 64). An annotation file holds about 13 values per
object and frame, so the bound takes 20 objects on each of 10 s of video at 24 fps with room to
spare; parsed, the most it lets through takes about 40 MB.

Nesting is bounded by Python's own parser, which gives up at its recursion limit (about 1000
levels; an annotation file nests 7): such a file is refused with ``BAD_USER_INPUT`` and one line
in the log, rather than the parser's error with no code.
"""

from __future__ import annotations

import json
import logging

from segmentation.errors import BadUserInput, UploadTooLarge

logger = logging.getLogger(__name__)

MAX_VALUES = 500_000
NOT_JSON = "the body must be a JSON annotation file"


def annotations_parse(
    body: bytes, *, max_bytes: int, label: str = "the annotation file", not_json: str = NOT_JSON
) -> object:
    """The JSON value of ``body``, an annotation file; :class:`UploadTooLarge` when it is longer
    than ``max_bytes``, :class:`BadUserInput` when it may hold more than :data:`MAX_VALUES`
    values, nests too deeply or is not JSON (``not_json`` then says so). ``label`` names the
    file in the other messages."""
    annotations_bound(body, max_bytes=max_bytes, label=label)
    try:
        return json.loads(body)
    except RecursionError:
        logger.warning("%s refused: JSON nested too deeply (%d bytes)", label, len(body))
        raise BadUserInput(f"{label} nests JSON too deeply to be an annotation file") from None
    except (ValueError, UnicodeDecodeError):
        raise BadUserInput(not_json) from None


def annotations_bound(body: bytes, *, max_bytes: int, label: str = "the annotation file") -> None:
    """What :func:`annotations_parse` checks before it parses, in time linear in ``body`` at C
    speed (a refusal costs next to nothing)."""
    if len(body) > max_bytes:
        raise annotations_too_large(size=len(body), max_bytes=max_bytes, label=label)
    values = 1 + body.count(b",") + body.count(b"{") + body.count(b"[")
    if values > MAX_VALUES:
        raise BadUserInput(
            f"{label} holds up to {values} JSON values; an annotation file holds at most "
            f"{MAX_VALUES}"
        )


def annotations_too_large(
    *, size: int, max_bytes: int, label: str = "the annotation file"
) -> UploadTooLarge:
    """The refusal of an annotation file of ``size`` bytes, over ``max_bytes``: here, and at the
    server when the file is longer than its path's body cap (``edge/body_limit.py``)."""
    return UploadTooLarge(
        f"{label} is {_megabytes(size)}, over the limit of {_megabytes(max_bytes)} "
        "(MAX_ANNOTATIONS_MB)"
    )


def _megabytes(size: int) -> str:
    return f"{size / 2**20:.1f} MB"
