"""Reads of the segmentation library: videos by path, their names, and pages of the gallery.

Pages follow the Relay cursor connections specification, over the gallery's videos (imported,
default and uploaded; not shared ones) in a stable order, oldest first. A cursor names one
video; ``after``/``before`` exclude it and everything on the far side, then ``first`` keeps the
first N and ``last`` the last N. ``hasNextPage`` and ``hasPreviousPage`` tell whether videos
exist beyond the page in either direction. At most :data:`MAX_PAGE_SIZE` videos come back; a
larger ``first`` or ``last`` is an error, and with neither the first page of that size comes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from django.db.models import Q, QuerySet
from graphql_relay import from_global_id, to_global_id

from segmentation.errors import BadUserInput, VideoNotFound
from segmentation.models import Video

MAX_PAGE_SIZE = 100
CURSOR_TYPE = "cursor"


@dataclass(frozen=True)
class Page:
    videos: list[Video]
    has_next_page: bool
    has_previous_page: bool


def videos_at(*, path: str) -> QuerySet[Video]:
    """The video stored at ``path``, as a query (of one or none). No stored path holds a NUL, so
    a path with one finds none without asking the database (PostgreSQL refuses it)."""
    return Video.objects.none() if "\x00" in path else Video.objects.filter(path=path)


def video_get(*, path: str) -> Video:
    video = videos_at(path=path).first()
    if video is None:
        raise VideoNotFound(f"no video at {path!r}")
    return video


def shared_video_get(*, path: str) -> Video:
    """A shared video by its path; any path outside the shared folder is not one."""
    video = videos_at(path=path).filter(origin=Video.Origin.SHARED).first()
    if video is None:
        raise VideoNotFound(f"no shared video at {path!r}")
    return video


def video_of_id(*, global_id: str, kind: str) -> Video | None:
    """The video a global ID of type ``kind`` names, or None for any other ID."""
    try:
        id_kind, pk = from_global_id(global_id)
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
    if id_kind != kind or not pk.isdigit():
        return None
    return Video.objects.filter(pk=pk).first()


def video_cursor(video: Video) -> str:
    return to_global_id(CURSOR_TYPE, str(video.pk))


def gallery() -> QuerySet[Video]:
    return Video.objects.exclude(origin=Video.Origin.SHARED).order_by("pk")


def gallery_name_free(*, wanted: str, limit: int) -> str:
    """``wanted``, or if a gallery video is shown by that name already, ``name (2).ext``,
    ``name (3).ext``, ... the first free one, each at most ``limit`` characters (the stem is
    cut to make room for the number)."""
    suffix = PurePosixPath(wanted).suffix
    stem = wanted[: len(wanted) - len(suffix)]
    # The rows that could hold a candidate (a numbered one keeps at least half the stem), named
    # or shown by their file's name; few, so they are compared here.
    prefix = stem[: limit // 2]
    rows = gallery().filter(
        Q(display_name__startswith=prefix) | Q(display_name="", path__contains=prefix)
    )
    taken = {video.name for video in rows.only("display_name", "path")}
    candidate, number = wanted, 1
    while candidate in taken:
        number += 1
        tail = f" ({number}){suffix}"
        candidate = stem[: limit - len(tail)].rstrip() + tail
    return candidate


def video_names(*, paths: list[str]) -> dict[str, str]:
    """The names the videos at ``paths`` are shown by (paths of no video are left out)."""
    wanted = [path for path in paths if "\x00" not in path]
    return {
        video.path: video.name
        for video in Video.objects.filter(path__in=wanted).only("path", "display_name")
    }


def videos_page(
    *,
    first: int | None = None,
    last: int | None = None,
    after: str | None = None,
    before: str | None = None,
) -> Page:
    for name, value in (("first", first), ("last", last)):
        if value is not None and not 0 <= value <= MAX_PAGE_SIZE:
            raise BadUserInput(f"{name} must be within 0..{MAX_PAGE_SIZE}, got {value}")
    everything = gallery()
    window = everything
    after_pk = None if after is None else _cursor_pk(after, "after")
    before_pk = None if before is None else _cursor_pk(before, "before")
    if after_pk is not None:
        window = window.filter(pk__gt=after_pk)
    if before_pk is not None:
        window = window.filter(pk__lt=before_pk)
    if first is None and last is None:
        first = MAX_PAGE_SIZE
    size = window.count()
    stop = size if first is None else min(size, first)
    start = 0 if last is None else max(stop - last, 0)
    # Beyond the page: left in the window by first/last, or left out by the cursors.
    has_previous = start > 0 or (
        after_pk is not None and everything.filter(pk__lte=after_pk).exists()
    )
    has_next = stop < size or (
        before_pk is not None and everything.filter(pk__gte=before_pk).exists()
    )
    return Page(list(window[start:stop]), has_next, has_previous)


def _cursor_pk(cursor: str, name: str) -> int:
    try:
        kind, pk = from_global_id(cursor)
        if kind != CURSOR_TYPE:
            raise ValueError
        return int(pk)
    except (ValueError, TypeError, UnicodeDecodeError):
        raise BadUserInput(f"{name} is not a cursor this server gave: {cursor!r}") from None
