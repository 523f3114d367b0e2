"""The threads that decode what the content checks look at (``picture_watch.py``,
``audio_watch.py``): off the event loop, few, shared by every channel of the process.

PyAV lets the GIL go while FFmpeg decodes, so a decode here costs the loop nothing but the
hand-over. Each watch keeps at most one decode in flight, so the pool never holds more work
than there are channels, and a CPU that falls behind makes the checks less frequent rather
than building a queue.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading

MAX_WORKERS = 4

_lock = threading.Lock()
_made: concurrent.futures.ThreadPoolExecutor | None = None


def decode_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's decoding threads, made on first use: one per core up to
    :data:`MAX_WORKERS` (a process plays one channel; benchmarks run many)."""
    global _made
    with _lock:
        if _made is None:
            _made = concurrent.futures.ThreadPoolExecutor(
                max_workers=min(MAX_WORKERS, os.cpu_count() or 1),
                thread_name_prefix="content-check",
            )
        return _made
