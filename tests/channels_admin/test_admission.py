"""Admission of /ts viewers (channels_admin/admission.py): the guard that needs no tuning, on a
real event loop. The fixed cap is tested against the real server in test_stream_server.py."""

from __future__ import annotations

import asyncio
import time

from channels_admin.admission import CALM_SEC, Admission, LoadGuard


async def test_a_slowed_event_loop_trips_the_guard_and_it_recovers() -> None:
    guard = LoadGuard(dict)
    admission = Admission(max_viewers=None, guard=guard)
    guard.start()
    try:
        await asyncio.sleep(0.5)
        calm = admission.refusal(viewers=3)

        # the loop's thread busy: every viewer's writer would wait this long
        time.sleep(0.6)  # noqa: ASYNC251 (blocking the loop is the point)
        await asyncio.sleep(0.2)
        tripped = admission.refusal(viewers=3)
        reason = guard.reason

        await asyncio.sleep(CALM_SEC + 0.5)
        recovered = admission.refusal(viewers=3)
    finally:
        await guard.stop()

    assert calm is None
    assert reason.startswith("its event loop ran 0.")
    assert tripped == f"this server is overloaded ({reason}): try again shortly"
    assert recovered is None
    assert admission.refused == 1


def test_viewers_falling_behind_trip_the_guard_past_a_share() -> None:
    drops = {viewer: 0 for viewer in range(5)}
    guard = LoadGuard(lambda: dict(drops))
    now = time.monotonic()
    guard.look(now, lag=0.0)

    drops[0] = 1_000  # one viewer in five: not yet
    guard.look(now + 0.1, lag=0.0)
    one = guard.refusing
    drops[1] = 500  # two in five
    guard.look(now + 0.2, lag=0.0)

    assert one is False
    assert guard.refusing is True
    assert guard.reason == "40% of its viewers fell behind the stream"


def test_the_fixed_cap_counts_its_refusals() -> None:
    admission = Admission(max_viewers=2)

    assert admission.refusal(viewers=1) is None
    assert admission.refusing(2) is True
    assert admission.refusal(viewers=2) == (
        "this server carries its most viewers (2): try again shortly"
    )
    assert admission.refused == 1
