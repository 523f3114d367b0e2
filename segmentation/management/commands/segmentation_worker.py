"""``manage.py segmentation_worker [--name NAME]``: an inference worker (docs/deploy.md).

A Channels worker process that holds one engine (one GPU, or the CPU) and the sessions opened
on it. It registers in Redis (name, engine, device, capacity, load), renews that every quarter
of ``SEGMENTATION_WORKER_TTL_SEC``, and answers the operations that web processes with
``SEGMENTATION_WORKERS=1`` route to it. SIGTERM or SIGINT drains it: no new sessions, each
session closed after its current operation, then it leaves the registry and exits; a second
signal exits at once.

Like the server (``edge/server.py``), it allocates from one malloc arena (``core/malloc.py``),
set before the engine is loaded or any thread started: each session's operations run in threads
of the executor, and each such thread would otherwise keep an arena of its own, whose free memory
(a session's frames, once it ends) ``malloc_trim`` does not return.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
import socket

from channels.layers import get_channel_layer
from channels.routing import ChannelNameRouter
from channels.worker import Worker
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.malloc import malloc_arenas_limit
from segmentation.services.local_sessions import local_sessions
from segmentation.services.process_engine import engine_chosen, engine_get
from segmentation.workers.registry import WorkerRegistry, worker_info_new
from segmentation.workers.worker import WorkerConsumer, WorkerRuntime

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run an inference worker: one engine, and the sessions web processes route to it."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--name",
            default=socket.gethostname().split(".")[0][:31] or "worker",
            help="The worker's name in the registry and its session IDs (default: the host's).",
        )

    def handle(self, *args: object, **options: object) -> None:
        malloc_arenas_limit(arenas=1)  # before any thread allocates (see the module)
        if not settings.REDIS_URL:
            raise CommandError("an inference worker needs REDIS_URL (its registry and channel)")
        engine = engine_get()  # a bad checkpoint stops the worker here, before it registers
        try:
            info = worker_info_new(
                name=str(options["name"]),
                engine=engine_chosen().engine,
                device=str(getattr(engine, "device", "cpu")),
                capacity=settings.MAX_SESSIONS,
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        asyncio.run(self._serve(info))

    async def _serve(self, info) -> None:
        loop = asyncio.get_running_loop()
        # Every session may run an operation at once (each has its own lock), and a few more.
        loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(settings.MAX_SESSIONS + 4, "operation")
        )
        layer = get_channel_layer()
        ttl = settings.SEGMENTATION_WORKER_TTL_SEC
        registry = WorkerRegistry.at_url(
            settings.REDIS_URL, prefix=settings.SEGMENTATION_WORKERS_PREFIX, ttl_seconds=ttl
        )
        runtime = WorkerRuntime(info, registry, layer, heartbeat_seconds=ttl / 4)
        router = ChannelNameRouter({info.channel: WorkerConsumer.as_asgi(runtime=runtime)})
        server = Worker(router, channels=[info.channel], channel_layer=layer)

        signals = asyncio.Queue()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, signals.put_nowait, number)
        await runtime.announce()
        # this worker runs propagation jobs, and takes up those whose process is gone
        local_sessions().jobs_watch(session_prefix=f"{info.id}.")
        tasks = [asyncio.create_task(server.arun()), asyncio.create_task(runtime.heartbeat())]
        self.stdout.write(
            f"segmentation worker {info.id}: engine {info.engine} on {info.device}, "
            f"{info.capacity} sessions, channel {info.channel}",
        )
        self.stdout.flush()
        try:
            await signals.get()
            self.stdout.write(f"segmentation worker {info.id}: draining")
            self.stdout.flush()
            drain = asyncio.create_task(runtime.drain())
            second = asyncio.create_task(signals.get())
            await asyncio.wait({drain, second}, return_when=asyncio.FIRST_COMPLETED)
            second.cancel()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)  # no renewal after this
            try:
                await registry.withdraw(info.id)
            except Exception as error:  # Redis away: the registration expires by itself
                logger.warning("worker %s: could not withdraw: %r", info.id, error)
        self.stdout.write(f"segmentation worker {info.id}: stopped")
