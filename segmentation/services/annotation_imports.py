"""An annotation file's work given to a session a frame at a time, each frame paid for before it
runs, so that an import is bounded as the clicks it replays are and no work is lost.

An export of a propagated session carries a mask on every frame, and the import gives each back
as a prompt: hundreds of prompts for a few seconds of video, far more than one GraphQL request
may send. Refusing such a file would lose the work (the annotator restores a session the server
lost by importing the tab's last export), so it is imported whole when its client can pay for
it, and otherwise in steps: before each frame the client is charged that frame's prompts
(:class:`ImportMeter`, which the caller supplies, pricing them as ``addPoints``), and the
session's engine budget is looked at (by its host, as for a click). When either is spent the
import stops there and keeps the frames it did: :class:`RateLimited` or
:class:`ResourceExhausted`, whose ``details`` name the ``imported_frames`` and the
``remaining_frames`` and give the imported frames' masks. The client sends the remaining frames
again, on top of what it did (``append``), once ``retry_after`` has passed. A frame that is not
imported is not charged. A client that hangs up stops it the same way, before its next frame
(:class:`Stopped`), keeping the frames done: nobody is left to hear what they were.
"""

from __future__ import annotations

import threading
from typing import Protocol

from core.threads import Stopped
from segmentation.errors import RateLimited, ResourceExhausted, SegmentationError
from segmentation.services.session_types import Annotations, FrameMasks
from segmentation.services.sessions import session_host


class ImportMeter(Protocol):
    """The client's limit, charged a frame at a time."""

    def take(self, frame: FrameMasks) -> int | None:
        """Charge the frame's prompts if the client has room for them: ``None``; else the
        seconds until it has, and nothing charged."""
        ...

    def give_back(self) -> None:
        """Uncharge the frame last taken: it was not imported."""
        ...


def session_annotations_import(
    *,
    session_id: str,
    annotations: Annotations,
    append: bool,
    meter: ImportMeter,
    stop: threading.Event | None = None,
    replay: str = "",
) -> list[FrameMasks]:
    """Give the session the work of an annotation file of its video (checked:
    ``uploads.annotations_read``), in frame order: in place of its own prompts (cleared with
    the first frame imported, so that an import stopped before it changes nothing), or with
    ``append`` on top of them. The masks of the file's frames, each as its import left it;
    :class:`RateLimited` or :class:`ResourceExhausted` when the client's limit or the session's
    engine budget stops it (see the module); :class:`Stopped` before the next frame once
    ``stop`` is set. ``replay``: the receipt of a session the server lost, whose work this is
    (``local_sessions.py``): its frames spend no engine budget while it covers them, but are
    charged to the client all the same."""
    host = session_host()
    frames = sorted(annotations.frames, key=lambda frame: frame.frame_index)
    if not frames and not append:
        host.import_annotations(session_id=session_id, annotations=annotations)  # clears it
    done: list[FrameMasks] = []
    for frame in frames:
        if stop is not None and stop.is_set():
            raise Stopped
        wait = meter.take(frame)
        if wait is not None:
            raise _stopped(
                RateLimited(f"this client sent more than its limit of work; try again in {wait} s"),
                retry_after=wait,
                done=done,
                frames=frames,
            )
        try:
            [masks] = host.import_annotations(
                session_id=session_id,
                annotations=Annotations(annotations.video, (frame,)),
                append=append or bool(done),
                replay=replay,
            )
        except ResourceExhausted as spent:
            meter.give_back()
            raise _stopped(spent, retry_after=spent.retry_after, done=done, frames=frames) from None
        except BaseException:
            meter.give_back()
            raise
        done.append(masks)
    return done


def _stopped(
    reason: SegmentationError,
    *,
    retry_after: float,
    done: list[FrameMasks],
    frames: list[FrameMasks],
) -> SegmentationError:
    """The error of an import stopped for ``reason`` after the frames ``done``, of its kind:
    what it did (the masks of those frames, as a whole import answers them) and what it did
    not."""
    remaining = [frame.frame_index for frame in frames[len(done) :]]
    if done:
        what = (
            f"the import stopped after {len(done)} of the file's {len(frames)} frames: its "
            f"frames up to {done[-1].frame_index} were imported and are kept, those from "
            f"{remaining[0]} on were not"
        )
    else:
        what = (
            f"the import stopped before the first of the file's {len(frames)} frames: the "
            "session is unchanged"
        )
    return type(reason)(
        f"{what}; {reason.message}",
        retry_after=retry_after,
        details={
            "imported_frames": [frame.frame_index for frame in done],
            "remaining_frames": remaining,
            "frames": [
                {
                    "frame_index": frame.frame_index,
                    "objects": [mask.as_message() for mask in frame.objects],
                }
                for frame in done
            ],
        },
    )
