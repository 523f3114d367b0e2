"""The mask exports' work: an annotation file checked against its video and converted to COCO,
YOLO or label PNGs, in a process of its own (``core/processes.py``).

Checking and converting a file of 8 MB is seconds of Python. In threads of the server's process,
three such exports held an honest click at 2.8 times its calm latency and a viewer's first byte
at 6.4 times (issue 47), whatever the threads' priority: the interpreter's lock is the server's.
In processes of their own they take at most ``EXPORT_PROCESSES`` cores, at a lower priority than
the server's, and a client that hangs up has its process killed at once. ``EXPORTS_QUEUED`` more
wait their turn in the order they came; past them the export is refused with ``SERVER_BUSY``.

The process imports no Django: the file comes parsed, with the video's :class:`VideoShape`; or,
for a session's stored work, its frames are fed to it as they are read (``work_exports.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

from django.conf import settings

from core.processes import ProcessPool
from core.threads import MadeOnce
from core.turns import NoTurn
from segmentation.annotation_check import frames_check
from segmentation.errors import ServerBusy
from segmentation.video_shape import VideoShape

Build = Callable[..., tuple[str, bytes]]  # (video=, data=) to the file's name and bytes
NICENESS = 10  # below the server's requests: an export may wait, a click should not
IDLE_SEC = 60.0  # an export process left idle this long ends, and gives its memory back


@MadeOnce
def export_processes() -> ProcessPool:
    """The server's export processes, from the settings on first use."""
    return ProcessPool(
        size=settings.EXPORT_PROCESSES,
        queued=settings.EXPORTS_QUEUED,
        niceness=NICENESS,
        idle_sec=IDLE_SEC,
    )


def export_convert(
    *, build: Build, data: dict, video: VideoShape, stop: threading.Event
) -> tuple[str, bytes]:
    """The download's name and bytes: ``data`` (a parsed annotation file) checked against
    ``video`` and converted by ``build``, in an export process. :class:`BadUserInput` for a
    fault of the file, :class:`ServerBusy` when too many exports wait, :class:`Stopped` once
    ``stop`` is set."""
    pool = export_processes()
    try:
        return pool.call(export_build, stop=stop, build=build, data=data, video=video)
    except NoTurn as refusal:
        raise exports_busy(pool, refusal) from None


def exports_busy(pool: ProcessPool, refusal: NoTurn) -> ServerBusy:
    """The refusal of an export that found the export processes' line full."""
    return ServerBusy(
        f"too many exports at once: {pool.turns.parallel} being converted and "
        f"{pool.turns.queued} waiting; try again in {refusal.retry_after} s",
        retry_after=refusal.retry_after,
    )


def export_build(*, build: Build, data: dict, video: VideoShape) -> tuple[str, bytes]:
    """What an export process runs for each export."""
    frames_check(data, video=video)
    return build(video=video, data=data)


def export_stream(
    *,
    chunks: Callable[..., Iterator[bytes]],
    items: Iterator[dict],
    video: VideoShape,
    object_ids: Iterable[int],
) -> Iterator[bytes]:
    """What an export process runs for each streamed export (``work_exports.py``): the frames
    it is fed, converted by ``chunks`` a piece at a time."""
    return chunks(video=video, frames=items, object_ids=object_ids)
