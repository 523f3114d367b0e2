"""Admission of /ts viewers (channels_admin/streaming/admission.py): the guard that needs no
tuning, on a real event loop and look by look. The fixed cap, and the guard in the real server,
are tested in test_stream_server.py."""

from __future__ import annotations

import asyncio
import re
import time

from channels_admin.streaming.admission import CALM_SEC, LATE_SEC, WINDOW_SEC, Admission, LoadGuard


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


def test_viewers_losing_data_stop_new_ones_and_losing_much_of_the_stream_cuts() -> None:
    viewers = Viewers(10)
    guard = LoadGuard(viewers)
    guard.look(0.0, lag=0.0)

    viewers.streamed_bytes = 10_000
    viewers.lost[0] = viewers.lost[1] = 1_000  # two in ten: not yet
    guard.look(0.1, lag=0.0)
    two = guard.limit
    viewers.lost[2] = 500  # three in ten, who lost little: slow links, maybe; no more join
    guard.look(0.2, lag=0.0)
    three = (guard.limit, guard.reason, list(viewers.cut_off))

    # all ten lost a quarter of the stream: it delivered seven and a half viewers' worth
    viewers.streamed_bytes = 20_000
    viewers.lost = dict.fromkeys(range(10), 5_000)
    guard.look(0.3, lag=0.0)

    assert two is None
    assert three == (10, "30% of its viewers lost data", [])
    assert (guard.limit, guard.reason, viewers.cut_off) == (
        6,
        "its viewers lost 25% of the stream",
        [6, 7, 8, 9],
    )

    # cuts come a window apart and count only what was lost since the last; however much the
    # viewers lose, a cut keeps half of them
    for look in range(1, 5):
        viewers.streamed_bytes += 10_000
        viewers.lost = {viewer: lost + 9_000 for viewer, lost in viewers.lost.items()}
        guard.look(0.3 + look * WINDOW_SEC / 4, lag=0.0)
        if look == 3:
            soon = guard.limit

    assert soon == 6
    assert (guard.limit, viewers.cut_off) == (3, [6, 7, 8, 9, 3, 4, 5])


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
