"""The work an owner keeps: each object's prompts and each frame's masks on a video, stored as
its sessions make them, so that no mask the server has shown is lost to a reload, a closed tab,
a restart or a crash.

The store is the database (``Work``, ``WorkPrompt``, ``WorkMask``): rows of COCO RLE, one per
object and frame that shows it. The database was chosen over files beside it because a frame's
masks must replace its old ones whole and at once (a transaction does that), every process of
the service already reaches it (inference workers included), and SQLite's write-ahead log and
PostgreSQL both keep a committed frame through a ``SIGKILL``. A frame of an hour-long video is a
few rows of about a kilobyte; reads are by frame, on the rows' unique index.

The host of a session writes here where its engine runs (``local_sessions.py``), before it
answers: a frame a client was sent is a frame the store holds. Reads are in ``selectors.py``.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone
from pycocotools import mask as coco_mask

from segmentation.engines.base import Prompt
from segmentation.models import Work, WorkMask, WorkPrompt
from segmentation.selectors import video_get
from segmentation.services.session_types import FrameMasks


def work_open(*, video_path: str, owner: str) -> int | None:
    """The ID of ``owner``'s work on the video (made now if it has none); None without an
    owner, whose work is kept nowhere."""
    if not owner:
        return None
    video = video_get(path=video_path)
    work, _ = Work.objects.get_or_create(video=video, owner=owner)
    return work.id


@transaction.atomic
def work_frames_keep(*, work_id: int, frames: Iterable[FrameMasks]) -> None:
    """Each frame's masks, every object's as the session shows them, in place of the frame's
    old ones (an object without a pixel there has none)."""
    for frame in frames:
        WorkMask.objects.filter(work_id=work_id, frame_index=frame.frame_index).delete()
        WorkMask.objects.bulk_create(
            WorkMask(
                work_id=work_id,
                frame_index=frame.frame_index,
                object_id=item.object_id,
                counts=item.rle["counts"],
            )
            for item in frame.objects
            if _has_pixels(item.rle)
        )
    _touch(work_id)


@transaction.atomic
def work_prompt_keep(
    *,
    work_id: int,
    object_id: int,
    frame_index: int,
    prompt: Prompt | None,
    frame: FrameMasks,
    kept: bytes | None = None,
) -> None:
    """The object's prompt on the frame (its clicks in pixels; None: a given mask), the
    engine's own form of the anchor (``kept``, if it gave one) and the frame's masks that came
    of it."""
    points = None if prompt is None else prompt.points.tolist()
    labels = None if prompt is None else [int(n) for n in prompt.labels]
    WorkPrompt.objects.update_or_create(
        work_id=work_id,
        object_id=object_id,
        frame_index=frame_index,
        defaults={"points": points, "labels": labels, "kept": kept},
    )
    work_frames_keep(work_id=work_id, frames=[frame])


@transaction.atomic
def work_prompt_forget(*, work_id: int, object_id: int, frame: FrameMasks) -> None:
    """The object's prompt on the frame is gone; the frame's masks as they are now."""
    WorkPrompt.objects.filter(
        work_id=work_id, object_id=object_id, frame_index=frame.frame_index
    ).delete()
    work_frames_keep(work_id=work_id, frames=[frame])


@transaction.atomic
def work_object_forget(*, work_id: int, object_id: int) -> None:
    """The object is gone from the work: its prompts and its masks on every frame."""
    WorkPrompt.objects.filter(work_id=work_id, object_id=object_id).delete()
    WorkMask.objects.filter(work_id=work_id, object_id=object_id).delete()
    _touch(work_id)


@transaction.atomic
def work_clear(*, work_id: int) -> None:
    """Every prompt and mask of the work is gone (the session's points all cleared)."""
    WorkPrompt.objects.filter(work_id=work_id).delete()
    WorkMask.objects.filter(work_id=work_id).delete()
    _touch(work_id)


def _touch(work_id: int) -> None:
    Work.objects.filter(id=work_id).update(updated=timezone.now())


def _has_pixels(rle: dict[str, object]) -> bool:
    """Whether an RLE mask has a pixel: more than its first run of zeros."""
    encoded = {"size": rle["size"], "counts": str(rle["counts"]).encode("ascii")}
    return int(coco_mask.area(encoded)) > 0
