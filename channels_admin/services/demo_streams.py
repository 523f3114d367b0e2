"""The built-in demo channels' streams: a live test pattern encoded in a thread per request,
while this process has an encoder free for the client (``streaming/encoder_slots.py``)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from channels_admin.runtime import stream_runtime
from channels_admin.services.refusal import Refusal
from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks
from core.threads import iterate_in_thread

# A demo stream ends when its client hangs up: a slot is soon free again.
DEMO_RETRY_AFTER_SEC = 10


@dataclass(frozen=True)
class DemoStream:
    """One demo stream: its chunks (None at the end), and what stops its encoder."""

    client: str
    next_chunk: Callable[[], Awaitable[bytes | None]]
    stop: threading.Event


def demo_stream_start(*, number: int, client: str) -> DemoStream | Refusal:
    """Demo channel ``number``'s stream for ``client`` (its address), or why not now; its
    encoder starts with the first chunk asked for. Stop it with :func:`demo_stream_stop`."""
    refused = stream_runtime().demo_slots.take(client)
    if refused is not None:
        return Refusal(f"{refused}: try again shortly", DEMO_RETRY_AFTER_SEC)
    stop = threading.Event()
    chunks = iterate_in_thread(
        lambda: pattern_chunks(PatternOptions(), label=f"TEST PATTERN {number}"),
        stop=stop,
        name="demo-channel",
        buffered=64,
    )
    return DemoStream(client=client, next_chunk=functools.partial(anext, chunks, None), stop=stop)


def demo_stream_stop(*, stream: DemoStream) -> None:
    """End ``stream``: its encoder stops at its next frame, and its slot is free at once."""
    stream.stop.set()
    stream_runtime().demo_slots.give_back(stream.client)
