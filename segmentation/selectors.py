"""Reads of the segmentation library: videos by path, their names, pages of the gallery, a
client's uploads being prepared, and the work an owner keeps on a video
(``services/work_store.py`` writes it).

Pages follow the Relay cursor connections specification, over the gallery's videos (imported,
default and uploaded; not shared ones) in a stable order, oldest first. A cursor names one
video; ``after``/``before`` exclude it and everything on the far side, then ``first`` keeps the
first N and ``last`` the last N. ``hasNextPage`` and ``hasPreviousPage`` tell whether videos
exist beyond the page in either direction. At most :data:`MAX_PAGE_SIZE` videos come back; a
larger ``first`` or ``last`` is an error, and with neither the first page of that size comes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.db.models import Q, QuerySet, Sum
from django.db.models.functions import Length
from graphql_relay import from_global_id, to_global_id

from segmentation.errors import BadUserInput, VideoNotFound
from segmentation.models import (
    PropagationJob,
    Video,
    VideoPreparation,
    Work,
    WorkMask,
    WorkPrompt,
)

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


def preparation_of(*, preparation_id: object, owner: str) -> VideoPreparation | None:
    """``owner``'s upload by its ID (any state but cancelled), or None."""
    return (
        VideoPreparation.objects.filter(pk=preparation_id, owner=owner)
        .exclude(state=VideoPreparation.State.CANCELLED)
        .select_related("video")
        .first()
    )


def preparations_shown(*, owner: str) -> list[VideoPreparation]:
    """``owner``'s uploads the gallery shows: those being prepared and those that failed,
    oldest first."""
    return list(
        VideoPreparation.objects.filter(
            owner=owner,
            state__in=[*VideoPreparation.UNFINISHED, VideoPreparation.State.FAILED],
        ).order_by("created")
    )


# Rows read from the database at a time while a work's masks are streamed (an export of an hour).
WORK_READ_ROWS = 2000


def work_video(*, work_id: int) -> Video:
    """The video the work is on."""
    return Video.objects.get(works__id=work_id)


def work_masks_at(*, work_id: int, frame_index: int) -> dict[int, str]:
    """The work's masks on a frame, as last shown: object ID -> COCO RLE counts (an object
    without a pixel there has none)."""
    rows = WorkMask.objects.filter(work_id=work_id, frame_index=frame_index)
    return dict(rows.values_list("object_id", "counts"))


def work_prompts(*, work_id: int) -> list[WorkPrompt]:
    """The work's prompts, frame by frame and each frame's objects in order."""
    return list(WorkPrompt.objects.filter(work_id=work_id).order_by("frame_index", "object_id"))


def work_frames(*, work_id: int) -> Iterator[tuple[int, dict[int, str]]]:
    """Every frame of the work with a mask, in order, as ``(frame_index, {object ID: counts})``:
    read from the database a few thousand rows at a time, so that an hour's masks never sit in
    memory whole."""
    rows = (
        WorkMask.objects.filter(work_id=work_id)
        .order_by("frame_index", "object_id")
        .values_list("frame_index", "object_id", "counts")
        .iterator(chunk_size=WORK_READ_ROWS)
    )
    frame, masks = -1, {}
    for frame_index, object_id, counts in rows:
        if frame_index != frame and masks:
            yield frame, masks
            masks = {}
        frame = frame_index
        masks[object_id] = counts
    if masks:
        yield frame, masks


def work_job_running(*, work_id: int) -> PropagationJob | None:
    """The propagation job running on the work, if one is."""
    return PropagationJob.objects.filter(
        work_id=work_id, status=PropagationJob.Status.RUNNING
    ).first()


def owner_job_running(*, video_path: str, owner: str) -> PropagationJob | None:
    """The propagation job running on the owner's work on the video, if one is."""
    if not owner:
        return None
    return PropagationJob.objects.filter(
        work__video__path=video_path, work__owner=owner, status=PropagationJob.Status.RUNNING
    ).first()


# Jobs a page of the owner's lists: the running ones and the latest ended ones.
OWNER_JOBS = 20


def owner_jobs(*, owner: str) -> list[PropagationJob]:
    """The owner's propagation jobs, newest first, each with its video."""
    if not owner:
        return []
    jobs = PropagationJob.objects.filter(work__owner=owner).select_related("work__video")
    return list(jobs.order_by("-id")[:OWNER_JOBS])


def job_get(*, job_id: int) -> PropagationJob:
    return PropagationJob.objects.select_related("work__video").get(id=job_id)


def work_clicks(*, work_id: int) -> Iterator[tuple[int, int, list, list]]:
    """The work's clicks (prompts with points, not given masks), in order of frame and object,
    as ``(frame_index, object_id, points in pixels, labels)``: read a few thousand rows at a
    time, as an import of an hour's file may have given a prompt on every frame."""
    return (
        WorkPrompt.objects.filter(work_id=work_id, points__isnull=False)
        .order_by("frame_index", "object_id")
        .values_list("frame_index", "object_id", "points", "labels")
        .iterator(chunk_size=WORK_READ_ROWS)
    )


def work_object_ids(*, work_id: int) -> list[int]:
    """The objects an export of the work holds, in order: those with a mask, or with clicks."""
    masked = WorkMask.objects.filter(work_id=work_id).values_list("object_id", flat=True)
    clicked = WorkPrompt.objects.filter(work_id=work_id, points__isnull=False).values_list(
        "object_id", flat=True
    )
    return sorted(set(masked.distinct()) | set(clicked.distinct()))


def work_masks_size(*, work_id: int) -> int:
    """The characters of the work's masks' RLE counts, in all: what an export reads."""
    total = WorkMask.objects.filter(work_id=work_id).aggregate(size=Sum(Length("counts")))
    return total["size"] or 0


@dataclass(frozen=True)
class WorkObject:
    """What the work holds of one object: the frames with its mask, as runs ``(first, last)``
    (inclusive, in order, apart by at least one frame), and its prompts in frame order."""

    object_id: int
    mask_runs: list[tuple[int, int]]
    prompts: list[WorkPrompt]


@dataclass(frozen=True)
class WorkSummary:
    """What a work holds: the video it is of (its path), and each of its objects."""

    video: str
    objects: list[WorkObject]


def work_summary(*, work_id: int) -> WorkSummary:
    """The work's video, and each of its objects in ID order: which frames show its mask, as
    runs, and its prompts. The masks are read a few thousand rows at a time in the unique
    index's order (frame, object), no counts among them, so that an hour of them is a few runs
    per object and never a list per frame."""
    runs: dict[int, list[list[int]]] = {}
    rows = (
        WorkMask.objects.filter(work_id=work_id)
        .order_by("frame_index", "object_id")
        .values_list("frame_index", "object_id")
        .iterator(chunk_size=WORK_READ_ROWS)
    )
    for frame_index, object_id in rows:
        object_runs = runs.setdefault(object_id, [])
        if object_runs and object_runs[-1][1] == frame_index - 1:
            object_runs[-1][1] = frame_index
        else:
            object_runs.append([frame_index, frame_index])
    prompts: dict[int, list[WorkPrompt]] = {}
    for prompt in work_prompts(work_id=work_id):
        prompts.setdefault(prompt.object_id, []).append(prompt)
    objects = [
        WorkObject(
            object_id=object_id,
            mask_runs=[(first, last) for first, last in runs.get(object_id, [])],
            prompts=prompts.get(object_id, []),
        )
        for object_id in sorted(runs.keys() | prompts.keys())
    ]
    video = Work.objects.filter(id=work_id).values_list("video__path", flat=True).get()
    return WorkSummary(video=video, objects=objects)


def work_masks_between(*, work_id: int, first: int, last: int) -> list[tuple[int, dict[int, str]]]:
    """The work's frames from ``first`` to ``last`` (inclusive) that have a mask, in order, as
    ``(frame_index, {object ID: counts})``; the caller bounds the range."""
    rows = (
        WorkMask.objects.filter(work_id=work_id, frame_index__gte=first, frame_index__lte=last)
        .order_by("frame_index", "object_id")
        .values_list("frame_index", "object_id", "counts")
    )
    frames: dict[int, dict[int, str]] = {}
    for frame_index, object_id, counts in rows:
        frames.setdefault(frame_index, {})[object_id] = counts
    return list(frames.items())
