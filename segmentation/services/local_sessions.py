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

import numpy as np
from django.conf import settings
from django.core import signing
from django.db import connections

from core.fair_turns import FairTurns, Turn
from core.malloc import memory_return
from core.threads import MadeOnce, Stopped, iterate_in_thread
from segmentation.engines.base import (
    Direction,
    Masks,
    Prompt,
    PromptError,
    VideoState,
)
from segmentation.engines.frames import FrameSourceError, VideoFileFrames
from segmentation.errors import (
    BadUserInput,
    SegmentationError,
    SessionNotFound,
    UnsupportedMedia,
)
from segmentation.models import PropagationJob
from segmentation.rle import rle_decode
from segmentation.selectors import job_get, work_masks_at, work_prompts
from segmentation.services.engine_budget import EngineBudget
from segmentation.services.engine_turns import engine_room_check, engine_turn, engine_turns
from segmentation.services.process_engine import engine_get
from segmentation.services.propagation_jobs import (
    Leg,
    job_carry_keep,
    job_claim_stale,
    job_end,
    job_legs,
    job_progress,
    job_session_moved,
    job_taken,
    jobs_heartbeat,
    jobs_heartbeat_sec,
    propagation_reach,
)
from segmentation.services.session_registry import Session, SessionRegistry
from segmentation.services.session_types import (
    Annotations,
    Clicks,
    FrameMasks,
    HeldSession,
    Propagation,
)
from segmentation.services.state_annotations import frame_annotated, object_import
from segmentation.services.videos import media_path
from segmentation.services.work_store import (
    work_clear,
    work_frames_keep,
    work_object_forget,
    work_open,
    work_prompt_forget,
    work_prompt_keep,
)

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
        self._jobs: dict[int, str] = {}  # the propagation jobs running here: their sessions
        self._jobs_guard = threading.Lock()
        self._watching = False
        self._watch_stop = threading.Event()
        self._session_prefix = ""

    def open(self, *, video_path: str, file: str, client: str = "", owner: str = "") -> str:
        """A new session for ``client`` (its address) on the video file ``file`` (the library's
        ``video_path``); its ID. Refused before the video is opened when there is no room. With
        an ``owner`` (the browser's cookie session), the session keeps its work in the store as
        it goes and starts with what the owner's earlier sessions on the video kept there
        (``work_store.py``): their prompts given back to the engine without running it, every
        mask they showed answered from the store."""
        self.registry.check_room(client=client)
        try:
            frames = VideoFileFrames(
                file, cache_bytes=settings.SESSION_FRAME_CACHE_MB * 1024 * 1024
            )
        except FrameSourceError as error:
            raise UnsupportedMedia(str(error)) from None
        state = engine_get().open(frames)
        try:
            work_id = work_open(video_path=video_path, owner=owner)
            if work_id is not None:
                _work_restore(state, work_id)
            session = self.registry.open(state=state, video_path=video_path, client=client)
        except BaseException:
            # another open took the last place meanwhile, or the stored work could not be read
            state.close()
            frames.close()
            raise
        session.work_id = work_id
        return session.id

    def held(self) -> list[HeldSession]:
        """Every live session of this host (:meth:`SessionRegistry.held`)."""
        return self.registry.held()

    def close(self, *, session_id: str) -> bool:
        """Close the session, or, while a propagation job runs on it, once the job ends: a
        page that closes (and closes its session) leaves its job running."""
        session = self.registry.get_quietly(session_id)
        if session is not None and session.job_id is not None:
            session.close_after_job = True
            return True
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

    def work(self, *, session_id: str) -> int | None:
        """Where the session keeps its work (None: nowhere)."""
        return self.registry.get(session_id).work_id

    def add_points(self, *, session_id: str, clicks: Clicks) -> FrameMasks:
        session = self.registry.get(session_id)
        with _held(session):
            with self._metered(session) as turn, _prompt_errors():
                masks = session.state.add_points(
                    frame_index=clicks.frame_index,
                    object_id=clicks.object_id,
                    points=clicks.points,
                    labels=clicks.labels,
                    clear_old_points=clicks.clear_old_points,
                )
                seconds = turn.held  # the engine's time, not the waits for its turn
            # Encoded and kept outside the turn and the budget: the engine's time is the
            # engine's; inside the session's lock, so that the store sees its operations in order.
            frame = FrameMasks.from_masks(clicks.frame_index, masks, seconds)
            _prompt_kept(session, clicks.object_id, frame)
            session.shown.add((clicks.frame_index, clicks.object_id))
        return frame

    def clear_points_in_frame(
        self, *, session_id: str, frame_index: int, object_id: int
    ) -> FrameMasks:
        session = self.registry.get(session_id)
        with _held(session):
            with self._metered(session), _prompt_errors():
                masks = session.state.clear_points_in_frame(
                    frame_index=frame_index, object_id=object_id
                )
            frame = FrameMasks.from_masks(frame_index, masks)
            if session.work_id is not None:
                work_prompt_forget(work_id=session.work_id, object_id=object_id, frame=frame)
        return frame

    def clear_points_in_video(self, *, session_id: str) -> None:
        session = self.registry.get(session_id)
        with _held(session):
            session.state.clear_points_in_video()
            if session.work_id is not None:
                work_clear(work_id=session.work_id)

    def remove_object(self, *, session_id: str, object_id: int) -> list[FrameMasks]:
        """Forget the object; the masks of the frames where it had points, without it."""
        session = self.registry.get(session_id)
        with _held(session):
            with self._metered(session), _prompt_errors():
                state: VideoState = session.state
                frames = sorted(state.prompts.get(object_id, {}))
                state.remove_object(object_id=object_id)
                masks = [(i, state.masks(frame_index=i)) for i in frames]
            answers = [FrameMasks.from_masks(i, frame) for i, frame in masks]
            if session.work_id is not None:
                work_object_forget(work_id=session.work_id, object_id=object_id)
                # the answered frames as shown now (another object may take its pixels there)
                work_frames_keep(work_id=session.work_id, frames=answers)
        return answers

    def propagation_job(self, *, session_id: str, job_id: int) -> None:
        """Run the job (a row the caller made, ``propagation_jobs.py``) on the session, in a
        thread of this process; returns once it runs. It keeps each frame in the session's work
        and its progress in the row, keeps the session open (a close waits for its end), and
        stops at its next frame on ``cancelPropagateInVideo`` or the session's end."""
        session = self.registry.get(session_id)
        if session.work_id is None:
            raise BadUserInput("this session keeps no work for a job to store its frames in")
        job = job_get(job_id=job_id)
        done = job.done
        if job.carry is not None and session.state.carry_restore(bytes(job.carry)) is not None:
            done = job.carry_done  # on from what the engine carried then, to the bit
            logger.info(
                "propagation job %d goes on from its carry after %d frames (%d were stored)",
                job.id,
                done,
                job.done,
            )
        legs = job_legs(
            start=job.start_frame,
            direction=job.direction,
            end=job.end_frame,
            frame_count=session.state.frame_count,
            done=done,
        )
        engine_room_check(self.turns, client=_client(session))
        job_taken(job_id=job.id, runner=self.boot, done=done)
        job.done = done
        with self._jobs_guard:
            self._jobs[job.id] = session.id
        session.job_id = job.id
        threading.Thread(
            target=self._job_run, args=(session, job, legs), name="propagation-job", daemon=True
        ).start()

    def _job_run(self, session: Session, job: PropagationJob, legs: list[Leg]) -> None:
        cancel = threading.Event()
        done, status, reason = job.done, PropagationJob.Status.DONE, ""
        every = settings.PROPAGATION_JOB_CARRY_FRAMES
        try:
            for leg in legs:
                frames = self._propagate(
                    session, leg.start, cancel, direction=leg.direction, reach=leg.reach
                )
                for frame in frames:
                    done += 1
                    if not job_progress(job_id=job.id, frame_index=frame.frame_index):
                        cancel.set()  # cancelled in its row, by a process that could not tell us
                    elif done % every == 0:  # the engine rests between frames: it is taken now
                        job_carry_keep(job_id=job.id, carry=session.state.carry(), done=done)
            if cancel.is_set() or session.ended:
                status, reason = PropagationJob.Status.CANCELLED, "cancelled"
            elif done < job.frame_count:
                status = PropagationJob.Status.FAILED
                reason = f"the engine stopped after {done} of {job.frame_count} frames"
        except Exception as error:  # the job's row must end, whatever went wrong
            logger.exception("propagation job %d failed", job.id)
            status, reason = PropagationJob.Status.FAILED, f"failed: {error}"
        finally:
            with contextlib.suppress(Exception):
                job_end(job_id=job.id, status=status, reason=reason)
            with self._jobs_guard:
                self._jobs.pop(job.id, None)
            session.job_id = None
            if session.close_after_job:
                self.registry.close(session.id)
            connections.close_all()

    def jobs_watch(self, *, session_prefix: str = "") -> None:
        """Renew the heartbeats of the jobs this process runs, and take up the jobs no
        process runs any more, every third of ``PROPAGATION_JOB_LEASE_SEC`` from now on, in a
        thread of its own (once per process). ``session_prefix``: what the process's session
        IDs are known by outside it (an inference worker's ID and a dot)."""
        with self._jobs_guard:
            if self._watching:
                return
            self._watching = True
        self._session_prefix = session_prefix
        threading.Thread(target=self._jobs_watch, name="propagation-jobs", daemon=True).start()

    def jobs_unwatch(self) -> None:
        """Stop the watch :meth:`jobs_watch` started (at its next round)."""
        self._watch_stop.set()

    def _jobs_watch(self) -> None:
        while not self._watch_stop.wait(jobs_heartbeat_sec()):
            try:
                with self._jobs_guard:
                    running = list(self._jobs)
                jobs_heartbeat(job_ids=running)
                job = job_claim_stale(runner=self.boot)
                if job is not None:
                    self._job_resume(job)
            except Exception:
                logger.exception("propagation jobs: a round of the watch failed")
            finally:
                connections.close_all()

    def _job_resume(self, job: PropagationJob) -> None:
        """Take up a job whose process is gone: a session on its work for its owner (the
        engine given the stored prompts back), and the job run on it from the frame after its
        last stored one. A job that cannot start now (no room) is left for a later round."""
        work = job.work
        try:
            session_id = self.open(
                video_path=work.video.path, file=str(media_path(work.video.path)), owner=work.owner
            )
        except SegmentationError as error:
            logger.warning("propagation job %d waits: %s", job.id, error)
            return
        job_session_moved(job_id=job.id, session_id=f"{self._session_prefix}{session_id}")
        logger.info(
            "propagation job %d taken up after %d of %d frames", job.id, job.done, job.frame_count
        )
        try:
            self.propagation_job(session_id=session_id, job_id=job.id)
        except SegmentationError as error:
            logger.warning("propagation job %d waits: %s", job.id, error)
            self.registry.close(session_id)
            return
        self.close(session_id=session_id)  # closed once the job ends

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
        with _held(session):
            replayed = prompts if replay else 0
            with self._metered(session, replayed=replayed), _prompt_errors():
                state: VideoState = session.state
                if not append:
                    state.clear_points_in_video()
                for frame in frames:
                    for item in sorted(frame.objects, key=lambda item: item.object_id):
                        object_import(state=state, frame_index=frame.frame_index, item=item)
                        session.shown.add((frame.frame_index, item.object_id))
                masks = [(f.frame_index, state.masks(frame_index=f.frame_index)) for f in frames]
            answers = [FrameMasks.from_masks(i, frame) for i, frame in masks]
            if session.work_id is not None:
                if not append:
                    work_clear(work_id=session.work_id)
                for frame, answer in zip(frames, answers, strict=True):
                    for item in frame.objects:
                        _prompt_kept(session, item.object_id, answer)
        return answers

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
        reach = propagation_reach(
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
            try:
                for frame_index, masks in steps:
                    self.registry.touch(session.id)
                    frame = FrameMasks.from_masks(frame_index, masks)
                    # kept before it is sent: a frame a client got is a frame the store holds
                    if session.work_id is not None:
                        work_frames_keep(work_id=session.work_id, frames=[frame])
                    session.shown.update((frame_index, object_id) for object_id in masks)
                    yield frame
            finally:
                # this thread's database connection, which nothing else will close
                connections.close_all()

    @contextlib.contextmanager
    def _metered(self, session: Session, *, replayed: int = 0) -> Iterator[Turn]:
        """A prompt, under the session's lock (:func:`_held`, which the caller holds), in a turn
        of the engine (which it yields): refused while the session's engine budget is spent, and
        the time it held the turn spent from it; the session kept alive while it waits for the
        turn, and the wait left when the session is closed meanwhile; but not ``replayed``
        prompts of a replay while what is left of it covers them (``Session.replay_left``)."""
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


def _prompt_kept(session: Session, object_id: int, frame: FrameMasks) -> None:
    """The object's prompt on the frame as the engine holds it now (gone if it holds none), and
    the frame's masks, kept in the session's work (if it keeps one)."""
    if session.work_id is None:
        return
    prompts = session.state.prompts.get(object_id, {})
    if frame.frame_index in prompts or object_id in session.state.object_ids:
        # clicks, or (none held on a frame the object was given) a given mask
        work_prompt_keep(
            work_id=session.work_id,
            object_id=object_id,
            frame_index=frame.frame_index,
            prompt=prompts.get(frame.frame_index),
            frame=frame,
            kept=session.state.anchor_kept(object_id=object_id, frame_index=frame.frame_index),
        )
    else:
        work_prompt_forget(work_id=session.work_id, object_id=object_id, frame=frame)


def _work_restore(state: VideoState, work_id: int) -> None:
    """Give a new state the work's prompts, each with its frame's mask as last shown, without
    running the engine; and let it recall any frame's masks from the store, so that it keeps
    only what its next frame needs (``VideoState.recall``)."""
    height, width = state.frames.height, state.frames.width

    def decoded(counts: str) -> np.ndarray:
        return rle_decode({"size": [height, width], "counts": counts})

    def recall(frame_index: int) -> Masks:
        stored = work_masks_at(work_id=work_id, frame_index=frame_index)
        return {object_id: decoded(counts) for object_id, counts in stored.items()}

    empty = np.zeros((height, width), bool)
    for row in work_prompts(work_id=work_id):
        counts = work_masks_at(work_id=work_id, frame_index=row.frame_index).get(row.object_id)
        prompt = (
            None
            if row.points is None
            else Prompt(np.asarray(row.points, np.float64), np.asarray(row.labels, np.int8))
        )
        state.restore(
            object_id=row.object_id,
            frame_index=row.frame_index,
            prompt=prompt,
            mask=empty if counts is None else decoded(counts),
            kept=None if row.kept is None else bytes(row.kept),
        )
    state.recall = recall


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
