"""An inference worker: one engine, the sessions opened on it, and the requests that web
processes route to it over the channel layer.

Messages (every one names the web process's ``reply`` channel and the request's ``id``):

- ``seg.call`` ``{op, args}``: an operation of :data:`OPERATIONS`; answered by one
  ``seg.reply`` ``{ok, result}`` or ``{ok: false, error: {code, message}}``.
- ``seg.propagate`` ``{session_id, start_frame_index, window}``: answered by a ``seg.reply``,
  then a ``seg.frame`` per frame, at most ``window`` of them ahead of the ``seg.credit``
  messages the web process sends as it hands frames to its client, then ``seg.end``.
  ``seg.stop`` (the client went away) ends it within a frame.

Operations run in threads, so a long one (a propagation) never holds up the others; each
session's own lock orders the operations on it. Session IDs are the worker's ID, a dot and the
session's ID in this process, so that a web process knows where to send them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass, field

from channels.consumer import AsyncConsumer

from core.threads import iterate_in_thread
from segmentation.errors import SegmentationError, SessionNotFound, TooManySessions
from segmentation.services.sessions import session_propagate, session_registry
from segmentation.workers.operations import OPERATIONS, error_encode
from segmentation.workers.registry import WorkerInfo, WorkerRegistry

logger = logging.getLogger(__name__)

STALLED_STREAM_SEC = 60.0  # no credit for this long: the web process is gone, stop propagating
DRAIN_POLL_SEC = 0.1


@dataclass
class _Stream:
    credit: asyncio.Semaphore
    stop: threading.Event = field(default_factory=threading.Event)


class WorkerRuntime:
    def __init__(
        self, info: WorkerInfo, registry: WorkerRegistry, layer, *, heartbeat_seconds: float
    ) -> None:
        self.info = info
        self._registry = registry
        self._layer = layer
        self._heartbeat_seconds = heartbeat_seconds
        self._tasks: set[asyncio.Task] = set()
        self._streams: dict[str, _Stream] = {}
        self._busy = 0  # operations under way
        self._operations = 0
        self.draining = False

    def spawn(self, coroutine) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def announce(self) -> None:
        load = len(session_registry())
        info = self.info.with_load(load, self._operations, draining=self.draining)
        await self._registry.announce(info)

    async def heartbeat(self) -> None:
        while True:
            try:
                await self.announce()
            except Exception:  # Redis away for a moment: the next beat tries again
                logger.exception("worker %s: could not renew its registration", self.info.id)
            await asyncio.sleep(self._heartbeat_seconds)

    async def call(self, message: dict) -> None:
        self._busy += 1
        try:
            answer = {"ok": True, "result": await self._run(message["op"], dict(message["args"]))}
        except SegmentationError as error:
            answer = {"ok": False, "error": error_encode(error)}
        except Exception as error:
            logger.exception("worker %s: %s failed", self.info.id, message.get("op"))
            answer = {"ok": False, "error": {"code": "WORKER_FAILED", "message": str(error)}}
        finally:
            self._busy -= 1
            self._operations += 1
        if message["op"] in ("open", "close") and answer["ok"]:
            # its load changed: web processes choosing a worker for the next session see it
            with contextlib.suppress(Exception):
                await self.announce()
        await self._reply(message, {"type": "seg.reply", **answer})

    async def _run(self, op: str, args: dict) -> object:
        if op == "open":
            if self.draining:
                raise TooManySessions(f"the worker {self.info.name} is stopping")
            return f"{self.info.id}.{await asyncio.to_thread(OPERATIONS['open'], **args)}"
        session_id = args.pop("session_id")
        try:
            local = self._local_id(session_id)
            return await asyncio.to_thread(OPERATIONS[op], session_id=local, **args)
        except SessionNotFound:
            raise SessionNotFound(f"no session with id {session_id!r}") from None

    def _local_id(self, session_id: str) -> str:
        worker, _, local = session_id.rpartition(".")
        if worker != self.info.id:
            raise SessionNotFound(f"no session with id {session_id!r}")
        return local

    async def propagate(self, message: dict) -> None:
        stream = _Stream(asyncio.Semaphore(max(1, int(message.get("window", 1)))))
        self._busy += 1
        try:
            try:
                frames = session_propagate(
                    session_id=self._local_id(message["session_id"]),
                    start_frame_index=message["start_frame_index"],
                )
            except SegmentationError as error:
                if isinstance(error, SessionNotFound):
                    error = SessionNotFound(f"no session with id {message['session_id']!r}")
                await self._reply(
                    message, {"type": "seg.reply", "ok": False, "error": error_encode(error)}
                )
                return
            self._streams[message["id"]] = stream
            await self._reply(message, {"type": "seg.reply", "ok": True, "result": None})
            try:
                await self._stream(message, stream, frames)
            finally:
                self._streams.pop(message["id"], None)
                with contextlib.suppress(Exception):
                    await self._reply(message, {"type": "seg.end"})
        finally:
            self._busy -= 1
            self._operations += 1

    async def _stream(self, message: dict, stream: _Stream, frames) -> None:
        parts = iterate_in_thread(lambda: frames, stop=stream.stop, name="propagation", buffered=1)
        async with contextlib.aclosing(parts):
            async for part in parts:
                try:
                    await asyncio.wait_for(stream.credit.acquire(), STALLED_STREAM_SEC)
                except TimeoutError:
                    logger.warning("worker %s: stream %s stalled", self.info.id, message["id"])
                    return
                if stream.stop.is_set():
                    return
                frame = {
                    "type": "seg.frame",
                    "frame_index": part.frame_index,
                    "frame_count": part.frame_count,
                    "results": part.results,
                }
                await self._reply(message, frame)

    def credit(self, stream_id: str, count: int) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None:
            for _ in range(count):
                stream.credit.release()

    def stop_stream(self, stream_id: str) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None:
            stream.stop.set()
            stream.credit.release()  # wake it if it waits for credit

    async def drain(self) -> None:
        """Take no new sessions, close each one once no operation holds it, and return when
        none is left and no operation is under way."""
        self.draining = True
        await self.announce()
        while True:
            held = await asyncio.to_thread(session_registry().close_idle)
            if held == 0 and self._busy == 0:
                return
            await asyncio.sleep(DRAIN_POLL_SEC)

    async def _reply(self, message: dict, answer: dict) -> None:
        await self._layer.send(message["reply"], {**answer, "id": message["id"]})


class WorkerConsumer(AsyncConsumer):
    """Takes the worker's messages off its channel; the runtime does the work in tasks of its
    own, so one slow operation never holds up the next message."""

    channel_layer_alias = None  # the worker's channel is read by the Channels worker server

    def __init__(self, runtime: WorkerRuntime) -> None:
        super().__init__()
        self.runtime = runtime

    async def seg_call(self, message: dict) -> None:
        self.runtime.spawn(self.runtime.call(message))

    async def seg_propagate(self, message: dict) -> None:
        self.runtime.spawn(self.runtime.propagate(message))

    async def seg_credit(self, message: dict) -> None:
        self.runtime.credit(message["id"], int(message.get("count", 1)))

    async def seg_stop(self, message: dict) -> None:
        self.runtime.stop_stream(message["id"])
