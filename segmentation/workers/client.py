"""A web process's side of the inference workers, the host of its sessions when
``SEGMENTATION_WORKERS`` is on: it sends each operation to the worker that holds the session and
waits for the answer, never longer than that worker stays registered.

The client runs an event loop of its own, in a thread, with a channel layer instance of its
own: the GraphQL resolvers are synchronous and run in threads of their own, and the propagation
view runs on the server's loop; each reaches the client through that loop. Answers come to one
channel per web process and are handed to whoever waits for them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import random
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import redis.asyncio as redis
from channels.layers import channel_layers
from django.conf import settings

from core.cancellation import task_cancel
from segmentation.engines.base import Direction
from segmentation.errors import (
    ServerBusy,
    SessionNotFound,
    TooManyClientSessions,
    TooManySessions,
    error_from_message,
)
from segmentation.services.session_types import (
    Annotations,
    Clicks,
    FrameMasks,
    HeldSession,
    Propagation,
)
from segmentation.workers.registry import WorkerInfo, WorkerRegistry, worker_channel

logger = logging.getLogger(__name__)

LIVENESS_POLL_SEC = 0.5  # how often a wait checks that its worker is still registered
SEEN_ALIVE_SEC = 1.0  # a worker seen registered this recently is asked without a fresh look
STREAM_WINDOW = 8  # frames a worker may send ahead of what the client has taken...
CREDIT_BATCH = 4  # ...given back this many at a time (each is a message through Redis)
_END = object()


class WorkerGone(SessionNotFound):
    pass


class _Inbox:
    """A stream's messages, handed from the client's loop to the loop that reads them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.queue: asyncio.Queue = asyncio.Queue()

    def deliver(self, message: dict) -> None:
        self._loop.call_soon_threadsafe(self.queue.put_nowait, message)


class WorkerClient:
    def __init__(self, *, redis_url: str, prefix: str, ttl_seconds: float) -> None:
        self._registry = WorkerRegistry.at_url(redis_url, prefix=prefix, ttl_seconds=ttl_seconds)
        self._ttl_seconds = ttl_seconds
        self._layer = channel_layers.make_backend("default")
        self._reply = f"segmentation.web.{uuid.uuid4().hex}"
        self._waiting: dict[str, asyncio.Future | _Inbox] = {}
        self._seen_alive: dict[str, float] = {}  # worker ID: when last seen registered
        self._opening: collections.Counter[str] = collections.Counter()  # opens under way
        # each client's opens, one at a time: its lock, and how many wait for it or hold it
        self._client_turns: dict[str, list] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="segmentation-workers", daemon=True
        )
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()

    async def _start(self) -> None:
        self._reader = asyncio.create_task(self._read())

    def shutdown(self) -> None:
        """Stop reading answers, and the client's loop; return once its thread has ended."""

        async def stop() -> None:
            await task_cancel(self._reader)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()

    # The session operations (segmentation/services/sessions.py's SessionHost), called from
    # any thread but the client's own.

    def open(self, *, video_path: str, file: str, client: str = "", owner: str = "") -> str:
        """A new session for ``client`` on the live worker with the most free places."""
        args = {"video_path": video_path, "file": file, "client": client, "owner": owner}
        opening = self._open(args)
        return asyncio.run_coroutine_threadsafe(opening, self._loop).result()

    def held(self) -> list[HeldSession]:
        """Every live worker's sessions."""
        return asyncio.run_coroutine_threadsafe(self._held(), self._loop).result()

    def close(self, *, session_id: str) -> bool:
        return self._call_here(session_id, "close")

    def ping(self, *, session_id: str) -> bool:
        return self._call_here(session_id, "ping")

    def engine(self, *, session_id: str) -> str:
        return self._call_here(session_id, "engine")

    def receipt(self, *, session_id: str) -> str:
        return self._call_here(session_id, "receipt")

    def work(self, *, session_id: str) -> int | None:
        return self._call_here(session_id, "work")

    def propagation_job(self, *, session_id: str, job_id: int) -> None:
        """The job runs on the worker holding the session, and outlives this process."""
        self._call_here(session_id, "propagation_job", job_id=job_id)

    def add_points(self, *, session_id: str, clicks: Clicks) -> FrameMasks:
        answer = self._call_here(session_id, "add_points", clicks=clicks.as_message())
        return FrameMasks.from_message(answer)

    def clear_points_in_frame(
        self, *, session_id: str, frame_index: int, object_id: int
    ) -> FrameMasks:
        answer = self._call_here(
            session_id, "clear_points_in_frame", frame_index=frame_index, object_id=object_id
        )
        return FrameMasks.from_message(answer)

    def clear_points_in_video(self, *, session_id: str) -> None:
        self._call_here(session_id, "clear_points_in_video")

    def remove_object(self, *, session_id: str, object_id: int) -> list[FrameMasks]:
        answer = self._call_here(session_id, "remove_object", object_id=object_id)
        return [FrameMasks.from_message(frame) for frame in answer]

    def cancel_propagation(self, *, session_id: str) -> bool:
        return self._call_here(session_id, "cancel_propagation")

    def annotations(self, *, session_id: str) -> Annotations:
        return Annotations.from_message(self._call_here(session_id, "annotations"))

    def import_annotations(
        self, *, session_id: str, annotations: Annotations, append: bool = False, replay: str = ""
    ) -> list[FrameMasks]:
        answer = self._call_here(
            session_id,
            "import_annotations",
            annotations=annotations.as_message(),
            append=append,
            replay=replay,
        )
        return [FrameMasks.from_message(frame) for frame in answer]

    async def propagation(
        self,
        *,
        session_id: str,
        start_frame_index: int,
        direction: Direction = "both",
        end_frame_index: int | None = None,
    ) -> Propagation:
        """The session's propagation, for a coroutine on another loop. The API error it fails
        with is raised before the first frame."""
        stream_id, worker_id = uuid.uuid4().hex, _worker_of(session_id)
        inbox = _Inbox(asyncio.get_running_loop())
        bounds = {"direction": direction, "end_frame_index": end_frame_index}
        start = self._propagate_start(session_id, start_frame_index, bounds, stream_id, inbox)
        await self._on_loop(start)
        try:
            answer = await self._next(worker_id, inbox)
            if answer is _END:
                raise WorkerGone(f"the worker {worker_id} stopped")
            frame_count = _result(answer)
        except BaseException:
            self._loop.call_soon_threadsafe(self._waiting.pop, stream_id, None)
            raise
        return Propagation(frame_count, self._frames(session_id, stream_id, inbox))

    def _call_here(self, session_id: str, op: str, **args: Any) -> Any:
        """Run ``op`` on the session's worker; its answer, or the API error it raised."""
        coroutine = self._call(_worker_of(session_id), op, {"session_id": session_id, **args})
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    # On the client's loop.

    async def _on_loop(self, coroutine) -> Any:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self._loop))

    async def _read(self) -> None:
        failing = False  # since the last answer read: one traceback an outage, not two a second
        while True:
            try:
                message = await self._layer.receive(self._reply)
            except asyncio.CancelledError:
                raise
            except Exception:
                if not failing:
                    logger.exception("segmentation workers: reading answers failed; retrying")
                failing = True
                await asyncio.sleep(LIVENESS_POLL_SEC)
                continue
            if failing:
                logger.warning("segmentation workers: reading answers again")
                failing = False
            waiter = self._waiting.get(message.get("id", ""))
            if isinstance(waiter, _Inbox):
                waiter.deliver(message)
            elif waiter is not None and not waiter.done():
                waiter.set_result(message)

    async def _call(self, worker_id: str, op: str, args: dict) -> Any:
        if not await self._alive(worker_id, recently=True):
            raise WorkerGone(f"no session with id {args['session_id']!r} (its worker stopped)")
        answer = await self._ask(worker_id, {"type": "seg.call", "op": op, "args": args})
        return _result(answer)

    async def _alive(self, worker_id: str, *, recently: bool = False) -> bool:
        """Whether the worker is registered; with ``recently``, having been seen so within
        SEEN_ALIVE_SEC is enough (a click then costs no look at the registry)."""
        now = time.monotonic()
        if recently and now - self._seen_alive.get(worker_id, -SEEN_ALIVE_SEC) < SEEN_ALIVE_SEC:
            return True
        with self._redis_answers():
            info = await self._registry.get(worker_id)
        if info is None:
            self._seen_alive.pop(worker_id, None)
            return False
        self._seen_alive[worker_id] = now
        return True

    async def _ask(self, worker_id: str, message: dict) -> dict:
        """Send ``message`` to the worker and wait for its answer while it lives."""
        request_id = uuid.uuid4().hex
        answer = self._loop.create_future()
        self._waiting[request_id] = answer
        try:
            with self._redis_answers():
                await self._layer.send(
                    worker_channel(worker_id), {**message, "reply": self._reply, "id": request_id}
                )
            while True:
                done, _ = await asyncio.wait({answer}, timeout=LIVENESS_POLL_SEC)
                if done:
                    return answer.result()
                if not await self._alive(worker_id):
                    raise WorkerGone(f"the worker {worker_id} stopped")
        finally:
            self._waiting.pop(request_id, None)

    @contextlib.contextmanager
    def _redis_answers(self) -> Iterator[None]:
        """Redis failing a look at the registry or a message to a worker (down, or silent past
        its timeout) fails the operation as SERVER_BUSY: nothing can reach a worker meanwhile."""
        try:
            yield
        except redis.RedisError as error:
            logger.warning("segmentation workers: Redis did not answer: %r", error)
            raise ServerBusy(
                "the inference workers cannot be reached (Redis does not answer); "
                f"try again in {math.ceil(self._ttl_seconds)} s",
                retry_after=math.ceil(self._ttl_seconds),
            ) from None

    async def _workers(self) -> list[WorkerInfo]:
        with self._redis_answers():
            return await self._registry.workers()

    async def _held(self, workers: list | None = None) -> list[HeldSession]:
        workers = await self._workers() if workers is None else workers
        asked = [self._ask(w.id, {"type": "seg.call", "op": "held", "args": {}}) for w in workers]
        answers = await asyncio.gather(*asked, return_exceptions=True)
        return [
            HeldSession.from_message(held)
            for answer in answers
            if isinstance(answer, dict) and answer.get("ok")
            for held in answer["result"]
        ]

    async def _open(self, args: dict) -> str:
        """On the worker with the most free places, counting the opens this process has under
        way (many at once would all see the same registry), ties broken at random (as other
        web processes choose too). The client's share is counted over every worker's sessions,
        one open of the client at a time in this process (opens through other web processes
        at the same moment may pass it by a few); each worker holds it for its own sessions."""
        client = args.get("client", "")
        cap = settings.MAX_SESSIONS_PER_CLIENT
        if not (cap and client):
            return await self._open_on(await self._workers(), args)
        turn = self._client_turns.setdefault(client, [asyncio.Lock(), 0])
        turn[1] += 1
        try:
            async with turn[0]:
                workers = await self._workers()
                held = sum(s.client == client for s in await self._held(workers))
                if held >= cap:
                    raise TooManyClientSessions(
                        f"this client holds its maximum of {cap} sessions; "
                        "close one or try again later"
                    )
                return await self._open_on(workers, args)
        finally:
            turn[1] -= 1
            if not turn[1]:
                del self._client_turns[client]

    async def _open_on(self, workers: list, args: dict) -> str:
        random.shuffle(workers)
        workers.sort(key=lambda w: self._opening[w.id] - w.free)
        for worker in (w for w in workers if w.free > self._opening[w.id]):
            self._opening[worker.id] += 1
            try:
                return _result(
                    await self._ask(worker.id, {"type": "seg.call", "op": "open", "args": args})
                )
            except (TooManySessions, WorkerGone):
                continue  # it filled up or stopped since its last heartbeat
            finally:
                self._opening[worker.id] -= 1
        if not workers:
            raise TooManySessions("no inference worker is running; try again later")
        raise TooManySessions(
            "every inference worker holds its maximum of sessions; try again later"
        )

    async def _propagate_start(
        self,
        session_id: str,
        start_frame_index: int,
        bounds: dict[str, Any],
        stream_id: str,
        inbox: _Inbox,
    ) -> None:
        worker_id = _worker_of(session_id)
        if not await self._alive(worker_id, recently=True):
            raise WorkerGone(f"no session with id {session_id!r} (its worker stopped)")
        self._waiting[stream_id] = inbox
        message = {
            "type": "seg.propagate",
            "session_id": session_id,
            "start_frame_index": start_frame_index,
            **bounds,
            "window": STREAM_WINDOW,
            "reply": self._reply,
            "id": stream_id,
        }
        try:
            with self._redis_answers():
                await self._layer.send(worker_channel(worker_id), message)
        except BaseException:
            self._waiting.pop(stream_id, None)
            raise

    async def _send_to(self, session_id: str, message: dict) -> None:
        await self._layer.send(worker_channel(_worker_of(session_id)), message)

    # On the loop that reads a stream.

    async def _next(self, worker_id: str, inbox: _Inbox) -> dict | object:
        """The stream's next message, or _END once its worker is gone."""
        while True:
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(inbox.queue.get(), LIVENESS_POLL_SEC)
            if not await self._on_loop(self._alive(worker_id)):
                return _END

    async def _frames(
        self, session_id: str, stream_id: str, inbox: _Inbox
    ) -> AsyncIterator[FrameMasks]:
        """The frames, acknowledged once the caller has taken them and asks for the next;
        closing this early (the client went away) stops the worker's propagation."""
        ended, taken = False, 0
        try:
            while True:
                message = await self._next(_worker_of(session_id), inbox)
                if message is _END or message["type"] == "seg.end":
                    ended = True
                    return
                yield FrameMasks.from_message(message["frame"])
                taken += 1
                if taken == CREDIT_BATCH:
                    credit = {"type": "seg.credit", "id": stream_id, "count": taken}
                    await self._on_loop(self._send_to(session_id, credit))
                    taken = 0
        finally:
            self._loop.call_soon_threadsafe(self._waiting.pop, stream_id, None)
            if not ended:
                stop = {"type": "seg.stop", "id": stream_id}
                with contextlib.suppress(Exception):
                    await self._on_loop(self._send_to(session_id, stop))


def _worker_of(session_id: str) -> str:
    worker, _, _ = session_id.rpartition(".")
    return worker


def _result(answer: dict) -> Any:
    if not answer["ok"]:
        raise error_from_message(answer["error"])
    return answer["result"]


_client: WorkerClient | None = None
_client_guard = threading.Lock()


def worker_client() -> WorkerClient:
    """The process's client, made on first use from the settings."""
    global _client
    with _client_guard:
        if _client is None:
            _client = WorkerClient(
                redis_url=settings.REDIS_URL,
                prefix=settings.SEGMENTATION_WORKERS_PREFIX,
                ttl_seconds=settings.SEGMENTATION_WORKER_TTL_SEC,
            )
        return _client
