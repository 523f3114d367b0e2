"""Segmentation sessions: the one API the GraphQL resolvers and the views call.

A session lives in the memory of the process that runs its engine, its *host*: this process
(the embedded default, ``local_sessions.py``), or the inference worker that opened it when
``SEGMENTATION_WORKERS`` is on (``workers/client.py`` asks it over the channel layer). Both
hosts take the same operations and answer with the same typed results (``session_types.py``).
This module knows the host only as :class:`SessionHost`: which one answers is given to it
(:func:`session_host_provide`) by the app's ``ready()`` (``apps.py``), above the services, so
that the services never import the workers. The annotation import, which drives a host a frame
at a time, is ``annotation_imports.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from segmentation.engines.base import Direction
from segmentation.selectors import video_get
from segmentation.services.session_types import (
    Annotations,
    Clicks,
    FrameMasks,
    HeldSession,
    Propagation,
)
from segmentation.services.videos import media_path


class SessionHost(Protocol):
    """Where sessions live and their operations run. Each operation raises the API's typed
    errors (``segmentation/errors.py``): an unknown or ended session is ``SessionNotFound``."""

    def open(self, *, video_path: str, file: str, client: str = "") -> str: ...

    def held(self) -> list[HeldSession]: ...

    def close(self, *, session_id: str) -> bool: ...

    def ping(self, *, session_id: str) -> bool: ...

    def engine(self, *, session_id: str) -> str: ...

    def receipt(self, *, session_id: str) -> str: ...

    def add_points(self, *, session_id: str, clicks: Clicks) -> FrameMasks: ...

    def clear_points_in_frame(
        self, *, session_id: str, frame_index: int, object_id: int
    ) -> FrameMasks: ...

    def clear_points_in_video(self, *, session_id: str) -> None: ...

    def remove_object(self, *, session_id: str, object_id: int) -> list[FrameMasks]: ...

    def cancel_propagation(self, *, session_id: str) -> bool: ...

    def annotations(self, *, session_id: str) -> Annotations: ...

    def import_annotations(
        self, *, session_id: str, annotations: Annotations, append: bool = False, replay: str = ""
    ) -> list[FrameMasks]: ...

    async def propagation(
        self,
        *,
        session_id: str,
        start_frame_index: int,
        direction: Direction = "both",
        end_frame_index: int | None = None,
    ) -> Propagation: ...


_host: Callable[[], SessionHost] | None = None


def session_host_provide(host: Callable[[], SessionHost]) -> None:
    """Where this process's sessions live from now on: ``host()`` gives the host each operation
    runs on (called at each operation, so that a host made on first use is made only then)."""
    global _host
    _host = host


def session_host() -> SessionHost:
    """The host given by :func:`session_host_provide`: this process's sessions, or the
    inference workers' when there are workers."""
    if _host is None:
        raise RuntimeError("no session host: the segmentation app's ready() provides it")
    return _host()


def session_start(*, path: str, client: str) -> str:
    """A new session on the library's video at ``path`` for ``client`` (its address, as
    ``core/client_address.py`` tells it), within its ``MAX_SESSIONS_PER_CLIENT``; its ID."""
    video = video_get(path=path)
    return session_host().open(
        video_path=video.path, file=str(media_path(video.path)), client=client
    )


def sessions_held() -> list[HeldSession]:
    """Every live session, by client and then oldest first: who holds what, for the admin."""
    return sorted(session_host().held(), key=lambda s: (s.client, -s.age_sec))


def session_close(*, session_id: str) -> bool:
    """Close the session and free what it holds; ``False`` if no such session lived."""
    return session_host().close(session_id=session_id)


def session_ping(*, session_id: str) -> bool:
    """Keep a session alive; ``True`` while it lives, ``False`` once closed or expired."""
    return session_host().ping(session_id=session_id)


def session_engine(*, session_id: str) -> str:
    """What answers the session, in a few words (the engine of the worker that holds it)."""
    return session_host().engine(session_id=session_id)


def session_receipt(*, session_id: str) -> str:
    """What the server has shown the session, signed: given back with a replay of its work
    after the server lost it, it is not metered again (``local_sessions.py``)."""
    return session_host().receipt(session_id=session_id)


def session_add_points(*, session_id: str, clicks: Clicks) -> FrameMasks:
    """Clicks for one object on one frame; every object's mask on that frame."""
    return session_host().add_points(session_id=session_id, clicks=clicks)


def session_clear_points_in_frame(
    *, session_id: str, frame_index: int, object_id: int
) -> FrameMasks:
    """Forget an object's points on a frame; every object's mask on that frame."""
    return session_host().clear_points_in_frame(
        session_id=session_id, frame_index=frame_index, object_id=object_id
    )


def session_clear_points_in_video(*, session_id: str) -> None:
    """Forget every point and object of the session."""
    session_host().clear_points_in_video(session_id=session_id)


def session_remove_object(*, session_id: str, object_id: int) -> list[FrameMasks]:
    """Forget the object; the masks of the frames where it had points, without it."""
    return session_host().remove_object(session_id=session_id, object_id=object_id)


def session_cancel_propagation(*, session_id: str) -> bool:
    """Stop the session's running propagation at its next frame."""
    return session_host().cancel_propagation(session_id=session_id)


def session_annotations(*, session_id: str) -> Annotations:
    """The session's masks, in the format ``uploadAnnotations`` takes."""
    return session_host().annotations(session_id=session_id)


async def session_propagation(
    *,
    session_id: str,
    start_frame_index: int,
    direction: Direction = "both",
    end_frame_index: int | None = None,
) -> Propagation:
    """The session's propagation as it is computed (see :class:`Propagation`): ``direction``
    from the start frame, up to ``end_frame_index`` inclusive (None: the video's end; with
    ``"both"``, as far from the start either way)."""
    return await session_host().propagation(
        session_id=session_id,
        start_frame_index=start_frame_index,
        direction=direction,
        end_frame_index=end_frame_index,
    )
