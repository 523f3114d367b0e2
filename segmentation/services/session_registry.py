"""The sessions a process holds, by ID: each session's engine state with its lock, its cancel
flag and its engine budget; expired after an idle timeout, renewed by every operation, and
capped in number, in all and for each client (its address, which the caller gives:
``MAX_SESSIONS_PER_CLIENT``), so that one client cannot take every place (issue 47). The
operations on the sessions are ``local_sessions.py``'s.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from segmentation.errors import SessionNotFound, TooManyClientSessions, TooManySessions
from segmentation.services.engine_budget import EngineBudget
from segmentation.services.session_types import HeldSession


@dataclass(eq=False)
class Session:
    """One video's engine state, held for one client, and what its operations share."""

    id: str
    state: Any
    last_used: float
    video_path: str = ""
    client: str = ""  # the address that opened it
    opened: float = 0.0  # by the registry's clock
    lock: threading.Lock = field(default_factory=threading.Lock)
    # the running propagation's stop flag (each propagation puts its own here)
    cancel: threading.Event = field(default_factory=threading.Event)
    ended: bool = False  # closed or expired: its state is being freed
    budget: EngineBudget | None = None  # the engine time its prompts may take; None: no limit
    # (frame, object) of every mask its answers and propagations held: what a receipt counts
    shown: set[tuple[int, int]] = field(default_factory=set)
    replay_of: str = ""  # the lost session whose receipt it replays, if any
    replay_left: int = 0  # how many more prompts that replay may give unmetered
    work_id: int | None = None  # where its work is kept (services/work_store.py); None: nowhere
    job_id: int | None = None  # the propagation job running on it, if any
    close_after_job: bool = False  # closed while its job ran: closed once the job ends


class SessionRegistry:
    """Thread-safe map of session ID to :class:`Session` with idle expiry, a cap, and a cap for
    each client (``max_per_client``; 0: none)."""

    def __init__(
        self,
        *,
        idle_timeout: float,
        max_sessions: int,
        max_per_client: int = 0,
        clock: Callable[[], float] = time.monotonic,
        on_end: Callable[[Session], None] = lambda session: None,
        budget: Callable[[], EngineBudget | None] = lambda: None,
    ) -> None:
        self._idle_timeout = idle_timeout
        self._max_sessions = max_sessions
        self._max_per_client = max_per_client
        self._clock = clock
        self._on_end = on_end
        self._budget = budget
        self._sessions: dict[str, Session] = {}
        self._guard = threading.Lock()

    def __len__(self) -> int:
        with self._guard:
            self._expire_locked()
            return len(self._sessions)

    def check_room(self, *, client: str = "") -> None:
        """:class:`TooManyClientSessions` if ``client`` holds its share of the sessions,
        :class:`TooManySessions` if the server holds its maximum; else nothing."""
        with self._guard:
            self._expire_locked()
            self._check_room_locked(client)

    def _check_room_locked(self, client: str) -> None:
        if self._max_per_client and client:
            held = sum(1 for session in self._sessions.values() if session.client == client)
            if held >= self._max_per_client:
                raise TooManyClientSessions(
                    f"this client holds its maximum of {self._max_per_client} sessions; "
                    "close one or try again later"
                )
        if len(self._sessions) >= self._max_sessions:
            raise TooManySessions(
                f"the server holds its maximum of {self._max_sessions} sessions; "
                "close one or try again later"
            )

    def open(self, *, state: Any, video_path: str = "", client: str = "") -> Session:
        """A new session for ``client`` (its address; empty: counted in no client's share)."""
        with self._guard:
            self._expire_locked()
            self._check_room_locked(client)
            now = self._clock()
            session = Session(
                id=str(uuid.uuid4()),
                state=state,
                last_used=now,
                video_path=video_path,
                client=client,
                opened=now,
                budget=self._budget(),
            )
            self._sessions[session.id] = session
            return session

    def held(self) -> list[HeldSession]:
        """Every live session: who opened it, on what, how long ago, idle how long."""
        with self._guard:
            self._expire_locked()
            now = self._clock()
            return [
                HeldSession(
                    session_id=s.id,
                    client=s.client,
                    video_path=s.video_path,
                    age_sec=now - s.opened,
                    idle_sec=now - s.last_used,
                )
                for s in self._sessions.values()
            ]

    def get(self, session_id: str) -> Session:
        """The live session with that ID, its idle timer renewed; else :class:`SessionNotFound`."""
        with self._guard:
            self._expire_locked()
            session = self._sessions.get(session_id)
            if session is None:
                raise SessionNotFound(f"no session with id {session_id!r}")
            session.last_used = self._clock()
            return session

    def get_quietly(self, session_id: str) -> Session | None:
        """The live session with that ID, if there is one, its idle timer left as it was."""
        with self._guard:
            self._expire_locked()
            return self._sessions.get(session_id)

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
