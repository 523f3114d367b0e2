"""Admission of /ts viewers (channels_admin/streaming/admission.py): the guard that needs no
tuning, on a real event loop and look by look. The fixed cap, and the guard in the real server,
are tested in test_stream_server.py."""

from __future__ import annotations

import asyncio
import re
import time

from channels_admin.streaming.admission import (
    CALM_SEC,
    LATE_SEC,
    SETTLE_SEC,
    WINDOW_SEC,
    Admission,
    LoadGuard,
)


class Viewers:
    """What the guard watches: the stream relayed, the bytes each viewer lost, and whom it cut
    off."""

    def __init__(self, count: int) -> None:
        self.streamed_bytes = 0
        self.lost = {viewer: 0 for viewer in range(count)}
        self.cut_off: list[int] = []

    @property
    def viewers(self) -> int:
        return len(self.lost)

    def viewer_drops(self) -> dict[int, int]:
        return dict(self.lost)

    def shed(self, count: int) -> None:
        newest = sorted(self.lost)[len(self.lost) - count :]
        self.cut_off += newest
        for viewer in newest:
            del self.lost[viewer]


async def test_a_late_event_loop_refuses_new_viewers_until_it_catches_up() -> None:
    viewers = Viewers(3)
    guard = LoadGuard(viewers)
    admission = Admission(max_viewers=None, guard=guard)
    guard.start()
    try:
        await asyncio.sleep(0.3)
        calm = admission.refusal(viewers=3)

        # the loop's thread busy: every viewer's writer waits this long for its turn; a viewer
        # asking now is refused before the guard's look, due a while ago, has run
        time.sleep(0.8)  # noqa: ASYNC251 (blocking the loop is the point)
        late = admission.refusal(viewers=3)
        reason = guard.reason

        await asyncio.sleep(0.3)
        caught_up = admission.refusal(viewers=3)
    finally:
        await guard.stop()

    assert calm is None
    assert re.fullmatch(r"its event loop runs 0\.[6-9]\d s late", reason), reason
    assert late == f"this server carries all the viewers it can ({reason}): try again shortly"
    assert caught_up is None
    assert (admission.refused, guard.limit, viewers.cut_off) == (1, None, [])


async def test_a_loop_that_stays_late_cuts_the_newest_viewers_off() -> None:
    viewers = Viewers(10)
    guard = LoadGuard(viewers)
    guard.start()
    try:
        started = time.monotonic()
        while guard.limit is None and time.monotonic() - started < LATE_SEC + 5:
            time.sleep(0.7)  # noqa: ASYNC251 (a loop that cannot keep up)
            await asyncio.sleep(0.01)
        late_for = time.monotonic() - started
        await asyncio.sleep(0.3)  # caught up
        refused = (guard.refuses(7), guard.refuses(8))
    finally:
        await guard.stop()

    # a fifth of the viewers it had when it fell behind go, the newest first
    # looks come a block apart: the first late one within two, the cut a second after it
    assert LATE_SEC < late_for < LATE_SEC + 3 * 0.7, late_for
    assert (guard.limit, guard.shed, viewers.cut_off) == (8, 2, [8, 9])
    assert refused == (False, True)


def test_viewers_arriving_put_the_cut_off_until_they_stop() -> None:
    viewers = Viewers(10)
    guard = LoadGuard(viewers)
    start = time.monotonic()
    guard.look(start, lag=0.8)
    arriving = guard.refuses(10)  # a crowd's work makes the loop late, not the viewers it has
    guard.look(start + LATE_SEC, lag=0.8)
    during = guard.limit

    guard.look(start + WINDOW_SEC + 0.1, lag=0.8)  # none for a while: they are the load

    assert (arriving, during) == (True, None)
    assert (guard.limit, viewers.cut_off) == (8, [8, 9])


def test_losses_after_a_crowd_cut_only_once_its_backlog_had_time_to_drain() -> None:
    viewers = Viewers(10)
    guard = LoadGuard(viewers)
    arrived = time.monotonic()
    guard.refuses(9)
    guard.look(arrived, lag=0.0)
    for look in range(1, 8):  # every viewer loses half of the stream, look after look
        viewers.streamed_bytes += 10_000
        viewers.lost = {viewer: lost + 5_000 for viewer, lost in viewers.lost.items()}
        guard.look(arrived + look * WINDOW_SEC / 3, lag=0.0)
        if look == 5:
            draining = (guard.limit, list(viewers.cut_off))

    assert draining == (10, [])  # held, not cut, while it may be the crowd's backlog
    assert (guard.limit, viewers.cut_off) == (5, [5, 6, 7, 8, 9])


def test_the_limit_rises_while_viewers_wait_at_it_and_all_is_calm() -> None:
    viewers = Viewers(10)
    guard = LoadGuard(viewers)
    guard.look(0.0, lag=0.8)
    guard.look(LATE_SEC, lag=0.8)
    cut = guard.limit

    guard.look(LATE_SEC + 0.1, lag=0.0)
    guard.look(LATE_SEC + CALM_SEC - 0.1, lag=0.0)
    too_soon = guard.limit
    guard.look(LATE_SEC + CALM_SEC, lag=0.0)  # the 8 it kept are at the limit: one more
    raised = guard.limit
    del viewers.lost[7]
    guard.look(LATE_SEC + 2 * CALM_SEC, lag=0.0)  # 7 of 9: no one waits for room

    assert (cut, too_soon, raised, guard.limit) == (8, 8, 9, 9)


def test_viewers_losing_data_for_a_window_stop_new_ones() -> None:
    viewers = Viewers(10)
    guard = LoadGuard(viewers)
    guard.look(0.0, lag=0.0)
    limits = []
    for look in range(1, 9):  # looks half a second apart
        viewers.streamed_bytes += 10_000
        viewers.lost[0] += 100
        viewers.lost[1] += 100  # two in ten losing: not yet
        if look >= 2:  # three in ten, who lose little: slow links, maybe, or a crowd arriving
            viewers.lost[2] += 100
        guard.look(look / 2, lag=0.0)
        limits.append(guard.limit)

    # a window after the three began to lose, it takes no more than it has
    assert limits == [None] * 7 + [10]
    assert (guard.reason, viewers.cut_off) == ("30% of its viewers lost data", [])


def test_losing_more_than_full_rate_allows_cuts_a_settling_time_apart() -> None:
    # given ten viewers, held where they are after a window of losses
    viewers = Viewers(10)
    guard = LoadGuard(viewers)
    guard.look(0.0, lag=0.0)
    for look in range(1, 9):
        viewers.streamed_bytes += 100
        viewers.lost = {viewer: lost + 1 for viewer, lost in viewers.lost.items()}
        guard.look(look / 2, lag=0.0)
    held = guard.limit

    # when every one of them loses 6% of the stream for a second
    viewers.streamed_bytes += 100_000
    viewers.lost = {viewer: lost + 6_000 for viewer, lost in viewers.lost.items()}
    guard.look(5.0, lag=0.0)

    # then it delivered 9.4 viewers' worth, no longer full rate: room for 80% of that
    assert held == 10
    assert (guard.limit, guard.reason, viewers.cut_off) == (
        7,
        "its viewers lost 6% of the stream",
        [7, 8, 9],
    )

    # and however much the rest lose (90% of the stream each second), the next cut waits for
    # the first's backlog to drain, and keeps half of them (3 of 7)
    limits = []
    for second in range(6, 12):
        viewers.streamed_bytes += 10_000
        viewers.lost = {viewer: lost + 9_000 for viewer, lost in viewers.lost.items()}
        guard.look(float(second), lag=0.0)
        limits.append(guard.limit)

    assert 5.0 + SETTLE_SEC == 11.0
    assert limits == [7, 7, 7, 7, 7, 3]
    assert viewers.cut_off == [7, 8, 9, 3, 4, 5, 6]


def test_viewers_arriving_never_hold_it_below_a_crowd_it_can_carry() -> None:
    # given a crowd arriving for two seconds, each newcomer costing the others some data
    viewers = Viewers(0)
    guard = LoadGuard(viewers)
    start = time.monotonic()
    refused = 0
    for look in range(1, 21):
        for _ in range(5):
            refused += guard.refuses(len(viewers.lost))
            viewers.lost = {viewer: lost + 10 for viewer, lost in viewers.lost.items()}
            viewers.lost[len(viewers.lost)] = 0
        viewers.streamed_bytes += 10_000
        guard.look(start + look / 10, lag=0.1)

    # then it admits the whole crowd, and holds it only if the losses outlast a window
    assert (refused, guard.limit, len(viewers.lost)) == (0, None, 100)


def test_a_few_viewers_on_slow_links_are_not_cut_off_however_much_they_lose() -> None:
    viewers = Viewers(10)
    guard = LoadGuard(viewers)
    guard.look(0.0, lag=0.0)
    for look in range(1, 11):
        viewers.streamed_bytes += 10_000
        for slow in range(5):  # half of them lose everything
            viewers.lost[slow] += 10_000
        guard.look(look * WINDOW_SEC / 4, lag=0.0)

    assert (guard.limit, guard.reason, viewers.cut_off) == (
        10,
        "50% of its viewers lost data",
        [],
    )


def test_viewers_leaving_in_numbers_teach_it_nothing() -> None:
    viewers = Viewers(100)
    guard = LoadGuard(viewers)
    guard.look(0.0, lag=0.0)
    for look in range(1, 4):
        leaving = sorted(viewers.lost)[:25]
        for viewer in leaving[:20]:
            del viewers.lost[viewer]
        for viewer in leaving[20:]:  # the next to go lose data on their way out
            viewers.lost[viewer] = 1_000
        guard.look(look * LATE_SEC, lag=0.8)  # and their going costs the loop time

    assert (guard.limit, viewers.cut_off) == (None, [])


def test_the_fixed_cap_counts_its_refusals() -> None:
    admission = Admission(max_viewers=2)

    assert admission.refusal(viewers=1) is None
    assert admission.refusing(2) is True
    assert admission.refusal(viewers=2) == (
        "this server carries its most viewers (2): try again shortly"
    )
    assert admission.refused == 1
