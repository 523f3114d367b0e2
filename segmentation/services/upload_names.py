"""What an uploaded video is called: the person's own file name, cleaned
(:func:`upload_name_clean`) and numbered if the gallery shows it already (``clip (2).mp4``), as
its ``display_name``. The same content uploaded again is the same video and keeps the name it
was first given: renaming it would relabel a video others have open.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath

from django.db import IntegrityError, transaction

from segmentation.models import DISPLAY_NAME_MAX, Video
from segmentation.selectors import gallery_name_free

NAME_WHEN_EMPTY = "video"
LONGEST_EXTENSION = 16  # past this, a "suffix" is part of the name, and is cut with it
NAME_TRIES = 5  # uploads racing for one name: each loss moves on to the next free number
# Invisible characters that can make a name read as another (U+202E turns "gpj.mp4" around);
# the joiners inside emoji sequences are kept.
_KEPT_FORMAT_CHARACTERS = {"\u200c", "\u200d"}


def upload_name_clean(*, name: str) -> str:
    """A client's file name as a display name: its last path part (``/`` or ``\\``), Unicode
    in NFC, whitespace runs as one space, control and invisible format characters dropped, at
    most :data:`DISPLAY_NAME_MAX` characters (the extension kept), ``video`` if nothing is left.
    """
    name = unicodedata.normalize("NFC", name.replace("\\", "/").rsplit("/", 1)[-1])
    name = re.sub(r"\s+", " ", name)
    name = "".join(
        character
        for character in name
        if not unicodedata.category(character).startswith("C")
        or character in _KEPT_FORMAT_CHARACTERS
    ).strip()
    if name in ("", ".", ".."):
        return NAME_WHEN_EMPTY
    suffix = PurePosixPath(name).suffix
    if len(suffix) > LONGEST_EXTENSION:
        suffix = ""
    stem = name[: len(name) - len(suffix)]
    return stem[: DISPLAY_NAME_MAX - len(suffix)].rstrip() + suffix


def video_name_give(*, video: Video, file_name: str) -> Video:
    """Name an uploaded video after its file, unless it has a name already (the same content
    uploaded before keeps its first one)."""
    wanted = upload_name_clean(name=file_name)
    for _ in range(NAME_TRIES):
        if video.display_name:
            return video
        name = gallery_name_free(wanted=wanted, limit=DISPLAY_NAME_MAX)
        try:
            with transaction.atomic():
                # Only while unnamed: a concurrent upload of the same content may have named it.
                Video.objects.filter(pk=video.pk, display_name="").update(display_name=name)
        except IntegrityError:  # another upload took the name in the meantime
            pass
        video.refresh_from_db(fields=["display_name"])
    return video
