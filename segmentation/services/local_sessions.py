"""Sessions held in this process's memory: the host of every session on the embedded server,
and of each inference worker's (segmentation/workers/worker.py runs the same operations).

A session wraps one engine state for one video. Each has its own lock, so sessions never
wait on each other's inference, and a cancel flag that is set without taking that lock. The
sessions are kept, expired and capped by their registry (``session_registry.py``); what an
export holds and what an import gives the engine are made in ``state_annotations.py``.
Each session's prompts spend engine time from a budget of its own (``engine_budget.py``), and
every engine call takes a turn of the process's engine, shared fairly between the sessions'
clients (``engine_turns.py``).

Replaying work is not new work: a client whose session this process lost to a restart may give a
new session its work back (``import_annotations`` with ``replay``) without spending the new
session's budget, up to what the server had shown the lost session. The server signs what it
has shown each session, a *receipt* (``receipt``: the session, its video, the process that holds
it and how many masks, one per frame and object, its answers and propagations held), which the
client keeps. A receipt is honoured once in a process (one new session replays it, in as many
imports as it takes), only if another process gave it (a session lost to this process's own
idle timeout or to a close is not a restart: its replay is metered as new work), for the same
video, and for as many prompts as it counts; past them, or with a receipt not honoured, the
import is metered as any. So a replay costs the engine once per restart what the server had
already shown, and a client cannot mint more: the receipt is signed, and the work it counts
was paid for as clicks or done by propagations.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import uuid
from collections.abc import Callable, Iterator

from django.conf import settings
from django.core import signing

from core.fair_turns import FairTurns, Turn
from core.malloc import memory_return
from core.threads import MadeOnce, Stopped, iterate_in_thread
from segmentation.engines.base import DIRECTIONS, Direction, Masks, PromptError, VideoState
from segmentation.engines.frames import FrameSourceError, VideoFileFrames
from segmentation.errors import (
    BadUserInput,
    SessionNotFound,
    TooManyClientSessions,
    TooManySessions,
    UnsupportedMedia,
)
from segmentation.services.engine_budget import EngineBudget
from segmentation.services.engine_turns import engine_room_check, engine_turn, engine_turns
from segmentation.services.process_engine import engine_get
from segmentation.services.session_registry import Session, SessionRegistry
from segmentation.services.session_types import (
    Annotations,
    Clicks,
    FrameMasks,
    HeldSession,
    Propagation,
)
from segmentation.services.state_annotations import frame_annotated, object_import

logger = logging.getLogger(__name__)


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


RECEIPT_SALT = "segmentation.replay-receipt"


class LocalSessions:
    """The session operations on this process's registry. Each answers with the typed results
    of ``session_types.py``; the masks are encoded here, where the engine runs. Engine calls
    take ``turns`` (none given: every call runs at once)."""

    def __init__(self, registry: SessionRegistry, turns: FairTurns | None = None) -> None:
        self.registry = registry
        self.turns = turns or FairTurns(parallel=sys.maxsize, queued=0, queued_per_client=0)
        # This process among those before and after it: its receipts are not honoured by itself.
        self.boot = uuid.uuid4().hex
        self._replayed: dict[str, str] = {}  # a lost session's ID: the session that replays it
        self._replayed_guard = threading.Lock()

    def open(self, *, video_path: str, file: str, client: str = "") -> str:
        """A new session for ``client`` (its address) on the video file ``file`` (the library's
        ``video_path``); its ID. Refused before the video is opened when there is no room."""
        self.registry.check_room(client=client)
        try:
            frames = VideoFileFrames(
                file, cache_bytes=settings.SESSION_FRAME_CACHE_MB * 1024 * 1024
            )
        except FrameSourceError as error:
            raise UnsupportedMedia(str(error)) from None
        state = engine_get().open(frames)
        try:
            return self.registry.open(state=state, video_path=video_path, client=client).id
        except (TooManySessions, TooManyClientSessions):
            # another open took the last place meanwhile
            state.close()
            frames.close()
            raise

    def held(self) -> list[HeldSession]:
        """Every live session of this host (:meth:`SessionRegistry.held`)."""
        return self.registry.held()

    def close(self, *, session_id: str) -> bool:
        return self.registry.close(session_id)

    def ping(self, *, session_id: str) -> bool:
        """``True`` while the session lives (its idle timer renewed), ``False`` once it ended."""
        return self.registry.touch(session_id)

    def engine(self, *, session_id: str) -> str:
        """What answers the session (:meth:`Engine.describe`): this process's engine."""
        self.registry.get(session_id)  # SessionNotFound when it is not here
        return engine_get().describe()

    def receipt(self, *, session_id: str) -> str:
        """The session's receipt, signed: what the server has shown it so far (see the module)."""
        session = self.registry.get(session_id)
        # Read without the session's lock, which a propagation holds throughout: a count taken
        # during one is a receipt for the frames it has done.
        shown = len(session.shown)
        return signing.dumps(
            {"session": session.id, "video": session.video_path, "boot": self.boot, "masks": shown},
            salt=RECEIPT_SALT,
            compress=True,
        )

    def add_points(self, *, session_id: str, clicks: Clicks) -> FrameMasks:
        session = self.registry.get(session_id)
        with self._metered(session) as turn, _prompt_errors():
            masks = session.state.add_points(
                frame_index=clicks.frame_index,
                object_id=clicks.object_id,
                points=clicks.points,
                labels=clicks.labels,
                clear_old_points=clicks.clear_old_points,
            )
            seconds = turn.held  # the engine's time, not the waits for its turn
            session.shown.add((clicks.frame_index, clicks.object_id))
        # Encoded outside the lock, the turn and the budget: the engine's time is the engine's.
        return FrameMasks.from_masks(clicks.frame_index, masks, seconds)

    def clear_points_in_frame(
        self, *, session_id: str, frame_index: int, object_id: int
    ) -> FrameMasks:
        session = self.registry.get(session_id)
        with self._metered(session), _prompt_errors():
            masks = session.state.clear_points_in_frame(
                frame_index=frame_index, object_id=object_id
            )
        return FrameMasks.from_masks(frame_index, masks)

    def clear_points_in_video(self, *, session_id: str) -> None:
        session = self.registry.get(session_id)
        with _held(session):
            session.state.clear_points_in_video()

    def remove_object(self, *, session_id: str, object_id: int) -> list[FrameMasks]:
        """Forget the object; the masks of the frames where it had points, without it."""
        session = self.registry.get(session_id)
        with self._metered(session), _prompt_errors():
            state: VideoState = session.state
            frames = sorted(state.prompts.get(object_id, {}))
            state.remove_object(object_id=object_id)
            masks = [(i, state.masks(frame_index=i)) for i in frames]
        return [FrameMasks.from_masks(i, frame) for i, frame in masks]

    def cancel_propagation(self, *, session_id: str) -> bool:
        """Stop the session's running propagation at its next frame; never waits for inference."""
        self.registry.get(session_id).cancel.set()
        return True

    def annotations(self, *, session_id: str) -> Annotations:
        """Every frame with a mask (after a propagation, every frame the objects are on),
        non-empty masks only, and each object's clicks on the frames where it has them (its
        mask there too, empty or not: the clicks are the work an import gives back)."""
        session = self.registry.get(session_id)
        with _held(session):
            state: VideoState = session.state
            frames = (frame_annotated(state=state, frame_index=i) for i in range(state.frame_count))
            return Annotations(session.video_path, tuple(f for f in frames if f.objects))

    def import_annotations(
        self, *, session_id: str, annotations: Annotations, append: bool = False, replay: str = ""
    ) -> list[FrameMasks]:
        """Give the session an annotation file's work (``annotation_imports.py`` sends it a
        frame at a time): each object's clicks on the frames where the file has them, sent
        again as ``addPoints`` would (so corrections there behave as they did); elsewhere its
        mask, given as a prompt (SAM 2's ``add_new_mask``), so that propagation starts from it
        and a click there corrects it. Objects by ID on each frame, as a person working down the
        video would have made them. In place of the session's own prompts, or with ``append``
        on top of them. The masks of the given frames.

        Metered as a click is: refused before anything changes while the session's engine
        budget is spent (:class:`ResourceExhausted`), and the time it takes spent from it; but
        with ``replay``, a receipt of a session another process lost, not while the receipt
        still covers the prompts (see the module)."""
        session = self.registry.get(session_id)
        if session.video_path and annotations.video != session.video_path:
            raise BadUserInput(
                f"the annotations are of {annotations.video!r}, not of this session's video "
                f"{session.video_path!r}"
            )
        if replay:
            self._replay_take(session, replay)
        frames = sorted(annotations.frames, key=lambda frame: frame.frame_index)
        prompts = sum(len(frame.objects) for frame in frames)
        with self._metered(session, replayed=prompts if replay else 0), _prompt_errors():
            state: VideoState = session.state
            if not append:
                state.clear_points_in_video()
            for frame in frames:
                for item in sorted(frame.objects, key=lambda item: item.object_id):
                    object_import(state=state, frame_index=frame.frame_index, item=item)
                    session.shown.add((frame.frame_index, item.object_id))
            masks = [(f.frame_index, state.masks(frame_index=f.frame_index)) for f in frames]
        return [FrameMasks.from_masks(i, frame) for i, frame in masks]

    def _replay_take(self, session: Session, receipt: str) -> None:
        """Let the session replay the work ``receipt`` counts, if it is one to honour (see the
        module): once per lost session in this process, for one session. One that is not is
        passed by, and the import is metered as new work."""
        try:
            shown = signing.loads(receipt, salt=RECEIPT_SALT)
            lost, video, boot, masks = (shown[k] for k in ("session", "video", "boot", "masks"))
        except (signing.BadSignature, KeyError, TypeError, ValueError):
            logger.info("session %s: a replay receipt not signed here, metered", session.id)
            return
        honoured = video == session.video_path and boot != self.boot and isinstance(masks, int)
        if not honoured or session.replay_of not in ("", lost):
            logger.info(
                "session %s: a replay of session %s not honoured, metered", session.id, lost
            )
            return
        with self._replayed_guard:
            replaying = self._replayed.setdefault(lost, session.id)
        if replaying != session.id:
            logger.info("session %s: session %s was replayed already, metered", session.id, lost)
            return
        with _held(session):
            if not session.replay_of:
                session.replay_of, session.replay_left = lost, masks

    async def propagation(
        self,
        *,
        session_id: str,
        start_frame_index: int,
        direction: Direction = "both",
        end_frame_index: int | None = None,
    ) -> Propagation:
        """The session's propagation, run in a thread of its own that holds the session's lock,
        each frame in a turn of the engine. Raises the API's error (no such session, a start or
        an end outside the video, an end on the wrong side of the start, the client's line for
        turns full) before the first frame. ``cancelPropagateInVideo`` and the session's end set
        the flag the engine checks between frames, and the stream ends; closing the frames (a
        hang-up) stops the thread at its next frame. Either takes a frame waiting for its turn
        out of the line."""
        session = self.registry.get(session_id)
        frame_count = session.state.frame_count
        if not 0 <= start_frame_index < frame_count:
            raise BadUserInput(
                f"start frame index {start_frame_index} is outside the video's frames "
                f"0..{frame_count - 1}"
            )
        reach = _frames_to_track(
            start=start_frame_index,
            direction=direction,
            end=end_frame_index,
            frame_count=frame_count,
        )
        engine_room_check(self.turns, client=_client(session))
        # One frame in hand at most: a cancel or a hang-up stops the engine within a frame.
        stop = threading.Event()
        frames = self._propagate(
            session,
            start_frame_index,
            threading.Event(),
            stop=stop,
            direction=direction,
            reach=reach,
        )
        return Propagation(
            frame_count,
            iterate_in_thread(lambda: frames, stop=stop, name="propagation", buffered=1),
        )

    def _propagate(
        self,
        session: Session,
        start: int,
        cancel: threading.Event,
        *,
        stop: threading.Event | None = None,
        direction: Direction = "both",
        reach: int | None = None,
    ) -> Iterator[FrameMasks]:
        with session.lock:
            # This run's own flag, set before the look below: an end from now on sets it, and
            # a cancel meant for an earlier run cannot stop this one.
            session.cancel = cancel
            if not self.registry.touch(session.id):
                return  # closed (or expired) while this propagation waited for the lock

            def gone() -> bool:
                """Whether the frame waiting for its turn should leave the line: cancelled,
                hung up or the session ended; a wait renews the session's idle timer."""
                stopped = cancel.is_set() or (stop is not None and stop.is_set())
                return stopped or not self.registry.touch(session.id)

            def turn() -> contextlib.AbstractContextManager[Turn]:
                # admitted with the first frame: the later ones are never refused
                return engine_turn(
                    self.turns,
                    client=_client(session),
                    state=session.state,
                    gone=gone,
                    admitted=True,
                )

            steps = _engine_frames(
                session, start, cancel, turn=turn, direction=direction, reach=reach
            )
            for frame_index, masks in steps:
                self.registry.touch(session.id)
                session.shown.update((frame_index, object_id) for object_id in masks)
                yield FrameMasks.from_masks(frame_index, masks)

    @contextlib.contextmanager
    def _metered(self, session: Session, *, replayed: int = 0) -> Iterator[Turn]:
        """:func:`_held`, for a prompt, in a turn of the engine (which it yields): refused
        while the session's engine budget is spent, and the time it held the turn spent from
        it; the session kept alive while it waits for the turn, and the wait left when the
        session is closed meanwhile; but not ``replayed`` prompts of a replay while what is
        left of it covers them (``Session.replay_left``)."""
        with _held(session):
            metered = session.budget is not None
            if replayed and session.replay_left >= replayed:
                session.replay_left -= replayed
                metered = False
            if metered:
                session.budget.check()
            with contextlib.ExitStack() as stack:
                try:
                    turn = stack.enter_context(
                        engine_turn(
                            self.turns,
                            client=_client(session),
                            state=session.state,
                            # a wait renews the session's idle timer: it is not idle, it queues
                            gone=lambda: not self.registry.touch(session.id),
                        )
                    )
                except Stopped:  # closed while it waited
                    raise SessionNotFound(f"no session with id {session.id!r}") from None
                try:
                    yield turn
                finally:
                    if metered:
                        session.budget.spend(turn.held)


def _client(session: Session) -> str:
    """Whose turn a session's engine calls take: the address that opened it; a session opened
    for no one, its own."""
    return session.client or f"session {session.id}"


@MadeOnce
def local_sessions() -> LocalSessions:
    """The process's sessions, configured from settings on first use."""
    return LocalSessions(
        SessionRegistry(
            idle_timeout=settings.SESSION_IDLE_TIMEOUT_SEC,
            max_sessions=settings.MAX_SESSIONS,
            max_per_client=settings.MAX_SESSIONS_PER_CLIENT,
            on_end=_session_free,
            budget=lambda: EngineBudget(
                burst=settings.SESSION_ENGINE_BURST_SEC, share=settings.SESSION_ENGINE_SHARE
            ),
        ),
        engine_turns(),
    )


def _frames_to_track(
    *, start: int, direction: Direction, end: int | None, frame_count: int
) -> int | None:
    """The API's last frame as SAM 2's ``max_frame_num_to_track``: how far past the start each
    direction goes (None: to the video's end). An end is a frame the person marked, so one
    outside the video or on the wrong side of the start is an error rather than cut short;
    with ``"both"`` its distance from the start bounds either way, as SAM 2's demo passes one
    count to its forward and its backward pass."""
    if direction not in DIRECTIONS:
        raise BadUserInput(f'direction must be "both", "forward" or "backward", got {direction!r}')
    if end is None:
        return None
    if not 0 <= end < frame_count:
        raise BadUserInput(
            f"end frame index {end} is outside the video's frames 0..{frame_count - 1}"
        )
    if direction == "forward" and end < start:
        raise BadUserInput(
            f"end frame index {end} is before start frame index {start}: "
            "a forward propagation ends at or after its start"
        )
    if direction == "backward" and end > start:
        raise BadUserInput(
            f"end frame index {end} is after start frame index {start}: "
            "a backward propagation ends at or before its start"
        )
    return abs(end - start)


def _engine_frames(
    session: Session,
    start: int,
    cancel: threading.Event,
    *,
    turn: Callable[[], contextlib.AbstractContextManager[object]],
    direction: Direction = "both",
    reach: int | None = None,
) -> Iterator[tuple[int, Masks]]:
    """The engine's propagation, each frame in a ``turn()``, ended at the last good frame if
    the engine fails: the client keeps every frame it got (a stream that stops short of its
    total says it failed), the error goes to the log with its traceback, and the session stays
    open for the next operation. A frame whose client went away while it waited for its turn
    ends it too, quietly."""
    frames = session.state.propagate(
        start_frame_index=start, cancel=cancel, direction=direction, max_frame_num_to_track=reach
    )
    done = 0
    while True:
        try:
            with turn():
                step = next(frames, None)
        except Stopped:
            return
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


@contextlib.contextmanager
def _held(session: Session) -> Iterator[None]:
    """The session's lock, for an operation that got the session before it ended: such an
    operation then finds it gone, as it would have a moment later."""
    with session.lock:
        if session.ended:
            raise SessionNotFound(f"no session with id {session.id!r}")
        yield


@contextlib.contextmanager
def _prompt_errors() -> Iterator[None]:
    """Report the engine's refusals of a prompt as the API's BAD_USER_INPUT."""
    try:
        yield
    except PromptError as error:
        raise BadUserInput(str(error)) from None
