"""Live segmentation sessions, held in the memory of the process that runs inference.

A session wraps one engine state for one video. Each has its own lock, so sessions never
wait on each other's inference, and a cancel flag that is set without taking that lock.
Sessions expire after an idle timeout, renewed by every operation, and their number is capped.
Each session's prompts spend engine time from a budget of its own (``engine_budget.py``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.conf import settings

from core.malloc import memory_return
from segmentation.engines.base import Masks, PromptError, VideoState
from segmentation.engines.frames import FrameSourceError, VideoFileFrames
from segmentation.errors import BadUserInput, SessionNotFound, TooManySessions, UnsupportedMedia
from segmentation.rle import rle_encode
from segmentation.selectors import video_get
from segmentation.services.engine_budget import EngineBudget
from segmentation.services.engines import engine_get
from segmentation.services.videos import media_path

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class Session:
    id: str
    state: Any
    last_used: float
    video_path: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    cancel: threading.Event = field(default_factory=threading.Event)
    ended: bool = False  # closed or expired: its state is being freed
    budget: EngineBudget | None = None  # the engine time its prompts may take; None: no limit


class SessionRegistry:
    """Thread-safe map of session ID to :class:`Session` with idle expiry and a cap."""

    def __init__(
        self,
        *,
        idle_timeout: float,
        max_sessions: int,
        clock: Callable[[], float] = time.monotonic,
        on_end: Callable[[Session], None] = lambda session: None,
        budget: Callable[[], EngineBudget | None] = lambda: None,
    ) -> None:
        self._idle_timeout = idle_timeout
        self._max_sessions = max_sessions
        self._clock = clock
        self._on_end = on_end
        self._budget = budget
        self._sessions: dict[str, Session] = {}
        self._guard = threading.Lock()

    def __len__(self) -> int:
        with self._guard:
            self._expire_locked()
            return len(self._sessions)

    def check_room(self) -> None:
        """:class:`TooManySessions` unless another session can open now."""
        with self._guard:
            self._expire_locked()
            self._check_room_locked()

    def _check_room_locked(self) -> None:
        if len(self._sessions) >= self._max_sessions:
            raise TooManySessions(
                f"the server holds its maximum of {self._max_sessions} sessions; "
                "close one or try again later"
            )

    def open(self, *, state: Any, video_path: str = "") -> Session:
        with self._guard:
            self._expire_locked()
            self._check_room_locked()
            session = Session(
                id=str(uuid.uuid4()),
                state=state,
                last_used=self._clock(),
                video_path=video_path,
                budget=self._budget(),
            )
            self._sessions[session.id] = session
            return session

    def get(self, session_id: str) -> Session:
        """The live session with that ID, its idle timer renewed; else :class:`SessionNotFound`."""
        with self._guard:
            self._expire_locked()
            session = self._sessions.get(session_id)
            if session is None:
                raise SessionNotFound(f"no session with id {session_id!r}")
            session.last_used = self._clock()
            return session

    def touch(self, session_id: str) -> bool:
        try:
            self.get(session_id)
        except SessionNotFound:
            return False
        return True

    def close(self, session_id: str) -> bool:
        with self._guard:
            session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        self._end(session)
        return True

    def close_idle(self) -> int:
        """Close every session that no operation holds now; how many are still held."""
        with self._guard:
            self._expire_locked()
            sessions = list(self._sessions.values())
        held = 0
        for session in sessions:
            if session.lock.acquire(blocking=False):
                session.lock.release()
                self.close(session.id)
            else:
                held += 1
        return held

    def _expire_locked(self) -> None:
        deadline = self._clock() - self._idle_timeout
        for session_id in [s.id for s in self._sessions.values() if s.last_used < deadline]:
            self._end(self._sessions.pop(session_id))

    def _end(self, session: Session) -> None:
        session.ended = True
        # A propagation still running on this session stops at its next frame.
        session.cancel.set()
        self._on_end(session)


@cache
def session_registry() -> SessionRegistry:
    """The process-wide registry, configured from settings on first use."""
    return SessionRegistry(
        idle_timeout=settings.SESSION_IDLE_TIMEOUT_SEC,
        max_sessions=settings.MAX_SESSIONS,
        on_end=_session_free,
        budget=lambda: EngineBudget(
            burst=settings.SESSION_ENGINE_BURST_SEC, share=settings.SESSION_ENGINE_SHARE
        ),
    )


def _session_free(session: Session) -> None:
    """Free an ended session's engine state and decoded frames at once, rather than whenever the
    garbage collector gets to them: once no operation holds the session (a propagation that
    was running ends at its next frame, in a thread of its own)."""

    def free() -> None:
        with session.lock:
            session.state.close()
            session.state.frames.close()
        memory_return()  # else the process stays at its peak (benchmarks/sessions_load.py)

    if session.lock.acquire(blocking=False):
        session.lock.release()
        free()
    else:
        threading.Thread(target=free, name="session-free", daemon=True).start()


def session_engine(*, session_id: str) -> str:
    """What answers the session (:meth:`Engine.describe`): this process's engine, which with
    inference workers is the worker's that holds the session."""
    session_registry().get(session_id)  # SessionNotFound when it is not here
    return engine_get().describe()


def session_ping(*, session_id: str) -> bool:
    """Keep a session alive; ``True`` while it lives, ``False`` once closed or expired."""
    return session_registry().touch(session_id)


@dataclass(frozen=True)
class FrameMasks:
    frame_index: int
    masks: Masks
    engine_seconds: float = 0.0  # time the engine took (not waiting for the lock)


def session_start(*, path: str) -> Session:
    """Open an engine state on the library's video at ``path``."""
    session_registry().check_room()
    video = video_get(path=path)
    return session_open(video_path=video.path, file=str(media_path(video.path)))


def session_open(*, video_path: str, file: str) -> Session:
    """Open an engine state on the video file ``file`` (the library's ``video_path``)."""
    registry = session_registry()
    registry.check_room()
    try:
        frames = VideoFileFrames(file, cache_bytes=settings.SESSION_FRAME_CACHE_MB * 1024 * 1024)
    except FrameSourceError as error:
        raise UnsupportedMedia(str(error)) from None
    return registry.open(state=engine_get().open(frames), video_path=video_path)


def session_close(*, session_id: str) -> bool:
    return session_registry().close(session_id)


def session_add_points(
    *,
    session_id: str,
    frame_index: int,
    object_id: int,
    points: list[list[float]],
    labels: list[int],
    clear_old_points: bool,
) -> FrameMasks:
    session = session_registry().get(session_id)
    with _metered(session), _prompt_errors():
        started = time.perf_counter()
        masks = session.state.add_points(
            frame_index=frame_index,
            object_id=object_id,
            points=points,
            labels=labels,
            clear_old_points=clear_old_points,
        )
    return FrameMasks(frame_index, masks, time.perf_counter() - started)


def session_clear_points_in_frame(
    *, session_id: str, frame_index: int, object_id: int
) -> FrameMasks:
    session = session_registry().get(session_id)
    with _metered(session), _prompt_errors():
        masks = session.state.clear_points_in_frame(frame_index=frame_index, object_id=object_id)
    return FrameMasks(frame_index, masks)


def session_clear_points_in_video(*, session_id: str) -> None:
    session = session_registry().get(session_id)
    with _held(session):
        session.state.clear_points_in_video()


def session_remove_object(*, session_id: str, object_id: int) -> list[FrameMasks]:
    """Forget the object; the masks of the frames where it had points, without it."""
    session = session_registry().get(session_id)
    with _metered(session), _prompt_errors():
        state: VideoState = session.state
        frames = sorted(state.prompts.get(object_id, {}))
        state.remove_object(object_id=object_id)
        return [FrameMasks(i, state.masks(frame_index=i)) for i in frames]


def session_cancel_propagation(*, session_id: str) -> bool:
    """Stop the session's running propagation at its next frame; never waits for inference."""
    session = session_registry().get(session_id)
    session.cancel.set()
    return True


@dataclass(frozen=True)
class PropagatedFrame:
    frame_index: int
    frame_count: int
    results: list[dict[str, object]]  # [{"object_id": k, "mask": {"size", "counts"}}, ...]


def session_propagate(*, session_id: str, start_frame_index: int = 0) -> Iterator[PropagatedFrame]:
    """Propagate the session's masks, yielding each frame's as RLE: forward from the start frame
    to the end, then backward to frame 0. Blocking: holds the session's lock while it runs, and
    ends at the next frame once the session's cancel flag is set (or the session closes)."""
    session = session_registry().get(session_id)
    frame_count = session.state.frame_count
    if not 0 <= start_frame_index < frame_count:
        raise BadUserInput(
            f"start frame index {start_frame_index} is outside the video's frames "
            f"0..{frame_count - 1}"
        )
    return _propagate(session, start_frame_index, frame_count)


def _propagate(session: Session, start: int, frame_count: int) -> Iterator[PropagatedFrame]:
    with session.lock:
        if not session_registry().touch(session.id):
            return  # closed (or expired) while this propagation waited for the lock
        session.cancel.clear()
        for frame_index, masks in _engine_frames(session, start):
            session_registry().touch(session.id)
            yield PropagatedFrame(
                frame_index,
                frame_count,
                [
                    {"object_id": object_id, "mask": rle_encode(mask)}
                    for object_id, mask in sorted(masks.items())
                ],
            )


def _engine_frames(session: Session, start: int) -> Iterator[tuple[int, Masks]]:
    """The engine's propagation, ended at the last good frame if the engine fails: the client
    keeps every frame it got (a stream that stops short of its total says it failed), the error
    goes to the log with its traceback, and the session stays open for the next operation."""
    frames = session.state.propagate(start_frame_index=start, cancel=session.cancel)
    done = 0
    while True:
        try:
            step = next(frames, None)
        except Exception:  # any engine failure: the stream and the session must outlive it
            logger.exception(
                "propagation of session %s failed after %d frames (from frame %d)",
                session.id,
                done,
                start,
            )
            return
        if step is None:
            return
        done += 1
        yield step


def session_annotations(*, session_id: str) -> dict[str, object]:
    """The session's masks in the annotation format ``uploadAnnotations`` takes: every frame
    with a mask (after a propagation, every frame the objects are on), non-empty masks only."""
    session = session_registry().get(session_id)
    frames = []
    with _held(session):
        state: VideoState = session.state
        for frame_index in range(state.frame_count):
            objects = [
                {"object_id": object_id, "mask": rle_encode(mask)}
                for object_id, mask in sorted(state.masks(frame_index=frame_index).items())
                if mask.any()
            ]
            if objects:
                frames.append({"frame_index": frame_index, "objects": objects})
    return {"video": session.video_path, "frames": frames}


@contextlib.contextmanager
def _held(session: Session) -> Iterator[None]:
    """The session's lock, for an operation that got the session before it ended: such an
    operation then finds it gone, as it would have a moment later."""
    with session.lock:
        if session.ended:
            raise SessionNotFound(f"no session with id {session.id!r}")
        yield


@contextlib.contextmanager
def _metered(session: Session) -> Iterator[None]:
    """:func:`_held`, for a prompt: refused while the session's engine budget is spent, and
    the time it takes spent from it."""
    with _held(session):
        if session.budget is not None:
            session.budget.check()
        started = time.perf_counter()
        try:
            yield
        finally:
            if session.budget is not None:
                session.budget.spend(time.perf_counter() - started)


@contextlib.contextmanager
def _prompt_errors() -> Iterator[None]:
    """Report the engine's refusals of a prompt as the API's BAD_USER_INPUT."""
    try:
        yield
    except PromptError as error:
        raise BadUserInput(str(error)) from None
