"""An inference worker: one engine, the sessions opened on it, and the requests that web
processes route to it over the channel layer.

Messages (every one names the web process's ``reply`` channel and the request's ``id``):

- ``seg.call`` ``{op, args}``: a session operation (:class:`SessionHost`'s, run on this
  process's :class:`LocalSessions`); answered by one ``seg.reply`` ``{ok, result}`` (the result
  as plain data) or ``{ok: false, error: {code, message}}``.
- ``seg.propagate`` ``{session_id, start_frame_index, direction, end_frame_index, window}``
  (the stream's body's fields): answered by a ``seg.reply`` whose result is the frame count,
  then a ``seg.frame`` ``{frame}`` per frame, at most ``window`` of them ahead of the
  ``seg.credit`` messages the web process sends as it hands frames to its client, then
  ``seg.end``. ``seg.stop`` (the client went away) closes the propagation, which stops it
  within a frame as a cancel does.

Operations run in threads, so a long one (a propagation) never holds up the others; each
session's own lock orders the operations on it. Session IDs are the worker's ID, a dot and the
session's ID in this process, so that a web process knows where to send them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from channels.consumer import AsyncConsumer

from segmentation.errors import SegmentationError, SessionNotFound, TooManySessions
from segmentation.services.local_sessions import local_sessions
from segmentation.services.session_types import Annotations, Clicks, Propagation
from segmentation.services.sessions import SessionHost
from segmentation.workers.registry import WorkerInfo, WorkerRegistry

logger = logging.getLogger(__name__)

STALLED_STREAM_SEC = 60.0  # no credit for this long: the web process is gone, stop propagating
DRAIN_POLL_SEC = 0.1
# What a web process may call (the propagation has messages of its own).
CALLS = frozenset(name for name in vars(SessionHost) if not name.startswith("_")) - {"propagation"}


@dataclass
class _Stream:
    credit: asyncio.Semaphore
    stopped: bool = False  # seg.stop came: the web process's client went away


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
        load = len(local_sessions().registry)
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
            answer = {"ok": False, "error": error.as_message()}
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
        if op not in CALLS:
            raise ValueError(f"no operation {op!r}")
        operation = getattr(local_sessions(), op)
        if op == "open":
            if self.draining:
                raise TooManySessions(f"the worker {self.info.name} is stopping")
            return f"{self.info.id}.{await asyncio.to_thread(operation, **args)}"
        if op == "held":
            # with the IDs web processes know them by
            held = await asyncio.to_thread(operation)
            return [
                {**session.as_message(), "session_id": f"{self.info.id}.{session.session_id}"}
                for session in held
            ]
        session_id = args.pop("session_id")
        try:
            local = self._local_id(session_id)
            if "clicks" in args:
                args["clicks"] = Clicks.from_message(args["clicks"])
            if "annotations" in args:
                args["annotations"] = Annotations.from_message(args["annotations"])
            return _plain(await asyncio.to_thread(operation, session_id=local, **args))
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
                propagation = await local_sessions().propagation(
                    session_id=self._local_id(message["session_id"]),
                    start_frame_index=message["start_frame_index"],
                    # absent from a web process older than the range: the whole video, as then
                    direction=message.get("direction", "both"),
                    end_frame_index=message.get("end_frame_index"),
                )
            except SegmentationError as error:
                if isinstance(error, SessionNotFound):
                    error = SessionNotFound(f"no session with id {message['session_id']!r}")
                await self._reply(
                    message, {"type": "seg.reply", "ok": False, "error": error.as_message()}
                )
                return
            self._streams[message["id"]] = stream
            answer = {"type": "seg.reply", "ok": True, "result": propagation.frame_count}
            await self._reply(message, answer)
            try:
                await self._stream(message, stream, propagation)
            finally:
                self._streams.pop(message["id"], None)
                with contextlib.suppress(Exception):
                    await self._reply(message, {"type": "seg.end"})
        finally:
            self._busy -= 1
            self._operations += 1

    async def _stream(self, message: dict, stream: _Stream, propagation: Propagation) -> None:
        # Closing the frames, however this ends, stops the engine within a frame.
        async with contextlib.aclosing(propagation.frames) as frames:
            async for frame in frames:
                try:
                    await asyncio.wait_for(stream.credit.acquire(), STALLED_STREAM_SEC)
                except TimeoutError:
                    logger.warning("worker %s: stream %s stalled", self.info.id, message["id"])
                    return
                if stream.stopped:
                    return
                await self._reply(message, {"type": "seg.frame", "frame": frame.as_message()})

    def credit(self, stream_id: str, count: int) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None:
            for _ in range(count):
                stream.credit.release()

    def stop_stream(self, stream_id: str) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None:
            stream.stopped = True
            stream.credit.release()  # wake it if it waits for credit

    async def drain(self) -> None:
        """Take no new sessions, close each one once no operation holds it, and return when
        none is left and no operation is under way; with Redis away too (the web processes
        cannot reach it then either)."""
        self.draining = True
        try:
            await self.announce()  # web processes choose it no more
        except Exception as error:
            logger.warning("worker %s: drains unannounced: %r", self.info.id, error)
        while True:
            held = await asyncio.to_thread(local_sessions().registry.close_idle)
            if held == 0 and self._busy == 0:
                return
            await asyncio.sleep(DRAIN_POLL_SEC)

    async def _reply(self, message: dict, answer: dict) -> None:
        await self._layer.send(message["reply"], {**answer, "id": message["id"]})


def _plain(result: object) -> object:
    """A session operation's result as the channel layer carries it."""
    if isinstance(result, list):
        return [_plain(item) for item in result]
    as_message = getattr(result, "as_message", None)
    return result if as_message is None else as_message()


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
