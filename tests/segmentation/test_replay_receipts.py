"""A session the server lost to a restart is given its work back without spending the new
session's engine budget, as far as the server's signed receipt says it had shown that work, once
(segmentation/services/local_sessions.py, issue 48). Two ``LocalSessions`` are two processes: the
one before the restart and the one after, whose sessions may spend a millionth of a second of
engine time (a clock that stands still: nothing refills)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from segmentation.engines.classic import ClassicEngine
from segmentation.engines.frames import VideoFileFrames
from segmentation.errors import ResourceExhausted
from segmentation.services.engine_budget import EngineBudget
from segmentation.services.local_sessions import LocalSessions
from segmentation.services.session_registry import SessionRegistry
from segmentation.services.session_types import Annotations, Clicks
from tests.segmentation.synthetic import HEIGHT, WIDTH, Video

PATH = "uploads/shapes.mp4"


class Hosts:
    """Processes of sessions on the synthetic video; every session's engine state is closed at
    the end."""

    def __init__(self, video_file: Path) -> None:
        self.video_file = video_file
        self.states: list = []

    def process(self, *, metered: bool) -> LocalSessions:
        def budget() -> EngineBudget | None:
            return EngineBudget(burst=1e-6, share=1e-6, clock=lambda: 0.0) if metered else None

        return LocalSessions(SessionRegistry(idle_timeout=60, max_sessions=8, budget=budget))

    def open(self, host: LocalSessions, *, path: str = PATH) -> str:
        state = ClassicEngine().open(VideoFileFrames(self.video_file))
        self.states.append(state)
        return host.registry.open(state=state, video_path=path).id


@pytest.fixture
def hosts(video_file: Path) -> Iterator[Hosts]:
    hosts = Hosts(video_file)
    yield hosts
    for state in hosts.states:
        state.close()
        state.frames.close()


def click(video: Video, object_id: int) -> Clicks:
    rows, columns = np.nonzero(video.masks[0][object_id])
    point = [columns.mean() / (WIDTH - 1), rows.mean() / (HEIGHT - 1)]
    return Clicks(0, object_id, [point], [1], True)


async def lost_work(host: LocalSessions, session_id: str, video: Video) -> Annotations:
    """Both objects clicked on frame 0 and propagated through the video: 24 masks shown."""
    for object_id in (1, 2):
        host.add_points(session_id=session_id, clicks=click(video, object_id))
    propagation = await host.propagation(session_id=session_id, start_frame_index=0)
    assert [frame.frame_index async for frame in propagation.frames] == list(range(12))
    work = host.annotations(session_id=session_id)
    assert sum(len(frame.objects) for frame in work.frames) == 24
    return work


def give(host: LocalSessions, session_id: str, work: Annotations, receipt: str) -> list[int]:
    """The work imported a frame at a time, as the import endpoint does: the frames imported
    before the engine budget stopped it."""
    done = []
    for frame in work.frames:
        try:
            host.import_annotations(
                session_id=session_id,
                annotations=Annotations(work.video, (frame,)),
                append=bool(done),
                replay=receipt,
            )
        except ResourceExhausted:
            break
        done.append(frame.frame_index)
    return done


async def test_a_lost_sessions_work_is_given_back_without_spending_the_budget(
    hosts: Hosts, video: Video
) -> None:
    # given the work of a session the process before the restart had shown, and its receipt
    before = hosts.process(metered=False)
    lost = hosts.open(before)
    work = await lost_work(before, lost, video)
    receipt = before.receipt(session_id=lost)

    # when the process after it gives a new session that work with the receipt
    after = hosts.process(metered=True)
    session_id = hosts.open(after)
    done = give(after, session_id, work, receipt)

    # then every frame is imported, and the budget is whole: one click runs, the next waits
    assert done == list(range(12))
    assert after.annotations(session_id=session_id) == work
    after.add_points(session_id=session_id, clicks=click(video, 1))
    with pytest.raises(ResourceExhausted):
        after.add_points(session_id=session_id, clicks=click(video, 2))


@pytest.mark.parametrize(
    "case", ["replayed twice", "this process's own", "tampered", "another video", "beyond it"]
)
async def test_a_replay_the_receipt_does_not_cover_is_metered(
    hosts: Hosts, video: Video, case: str
) -> None:
    before = hosts.process(metered=False)
    lost = hosts.open(before)
    work = await lost_work(before, lost, video)
    receipt = before.receipt(session_id=lost)
    after = hosts.process(metered=True)
    session_id = hosts.open(after)
    if case == "replayed twice":  # in another new session first
        assert give(after, hosts.open(after), work, receipt) == list(range(12))
    elif case == "this process's own":
        mine = hosts.open(after)
        assert give(after, mine, work, "") == [0]
        receipt = after.receipt(session_id=mine)
    elif case == "tampered":
        receipt = receipt[:-3] + ("AAA" if not receipt.endswith("AAA") else "BBB")
    elif case == "another video":
        elsewhere = hosts.open(before, path="uploads/other.mp4")
        receipt = before.receipt(session_id=elsewhere)
    else:  # the receipt's 24 masks are given, then 24 more
        assert give(after, session_id, work, receipt) == list(range(12))

    # the first frame runs on the budget, which it spends; the second waits
    assert give(after, session_id, work, receipt) == [0]
