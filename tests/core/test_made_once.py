"""core/threads.py's MadeOnce: a process-wide object made once, however many threads ask."""

from __future__ import annotations

import concurrent.futures
import threading
import time

from core.threads import MadeOnce


def test_what_is_made_once_is_made_once_however_many_threads_ask_at_once():
    # given a slow factory, and eight threads asking for its product together
    made = []

    def make() -> object:
        time.sleep(0.05)
        made.append(object())
        return made[-1]

    once = MadeOnce(make)
    start = threading.Barrier(8)

    def ask(_: int) -> object:
        start.wait(timeout=10)
        return once()

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(ask, range(8)))

    # then one was made, and every thread got it; forgotten, the next ask makes another
    assert len(made) == 1
    assert all(item is made[0] for item in got)
    once.cache_clear()
    assert once() is made[1]
