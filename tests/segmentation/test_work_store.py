"""The work an owner keeps (services/work_store.py), driven through this process's session host
as the API drives it: clicks, propagations, corrections and clears, each kept before it is
answered."""

from __future__ import annotations

import numpy as np
import pytest
from asgiref.sync import sync_to_async as sync

from segmentation.models import Work, WorkMask, WorkPrompt
from segmentation.rle import rle_decode
from segmentation.services.local_sessions import LocalSessions
from segmentation.services.session_registry import SessionRegistry
from segmentation.services.session_types import Clicks, FrameMasks
from segmentation.services.videos import media_path
from tests.segmentation.synthetic import HEIGHT, WIDTH, Video

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sessions():
    host = LocalSessions(SessionRegistry(idle_timeout=60, max_sessions=4))
    yield host
    host.registry.close_idle()


def open_session(sessions: LocalSessions, path: str, owner: str) -> str:
    return sessions.open(video_path=path, file=str(media_path(path)), owner=owner)


def centre_click(video: Video, object_id: int, frame_index: int = 0) -> Clicks:
    rows, columns = np.nonzero(video.masks[frame_index][object_id])
    point = [columns.mean() / (WIDTH - 1), rows.mean() / (HEIGHT - 1)]
    return Clicks(frame_index, object_id, [point], [1], clear_old_points=True)


def stored(owner: str) -> dict[tuple[int, int], str]:
    """(frame, object) -> counts of the owner's kept masks."""
    rows = WorkMask.objects.filter(work__owner=owner)
    return {(r.frame_index, r.object_id): r.counts for r in rows}


def shown(frames: list[FrameMasks]) -> dict[tuple[int, int], str]:
    """(frame, object) -> counts of the masks with a pixel among answers, the last one winning."""
    masks = {}
    for frame in frames:
        for item in frame.objects:
            key = (frame.frame_index, item.object_id)
            masks.pop(key, None)
            if rle_decode(item.rle).any():
                masks[key] = item.rle["counts"]
    return masks


async def propagated(sessions: LocalSessions, session_id: str, start: int = 0) -> list[FrameMasks]:
    propagation = await sessions.propagation(session_id=session_id, start_frame_index=start)
    return [frame async for frame in propagation.frames]


async def test_a_session_keeps_each_prompt_and_each_mask_before_it_answers(
    sessions, library_video, video
):
    # given a session of an owner
    session_id = await sync(open_session)(sessions, library_video, "owner-a")

    # when the owner clicks two objects and propagates
    clicks = [centre_click(video, 1), centre_click(video, 2, frame_index=3)]
    answers = [await sync(sessions.add_points)(session_id=session_id, clicks=c) for c in clicks]
    frames = await propagated(sessions, session_id)

    # then the store holds every mask with a pixel the owner was shown, the last of each
    assert len(frames) == 12
    kept = await sync(stored)("owner-a")
    assert kept == shown([*answers, *frames])
    assert len(kept) == 24  # both objects on all 12 frames
    # and each object's clicks, in the engine's pixels
    prompts = await sync(
        lambda: list(
            WorkPrompt.objects.order_by("object_id").values_list(
                "object_id", "frame_index", "points", "labels"
            )
        )
    )()
    expected = [
        (
            c.object_id,
            c.frame_index,
            [[x * (WIDTH - 1), y * (HEIGHT - 1)] for x, y in c.points],
            [1],
        )
        for c in clicks
    ]
    assert prompts == expected


async def test_corrections_clears_and_removals_change_the_store_as_they_change_the_answers(
    sessions, library_video, video
):
    # given an owner's two objects, propagated
    session_id = await sync(open_session)(sessions, library_video, "owner-a")
    answers = [
        await sync(sessions.add_points)(session_id=session_id, clicks=centre_click(video, i))
        for i in (1, 2)
    ]
    answers += await propagated(sessions, session_id)

    # when a propagated frame is corrected, then the correction is kept in its place
    correction = centre_click(video, 1, frame_index=6)
    answers.append(await sync(sessions.add_points)(session_id=session_id, clicks=correction))
    assert await sync(stored)("owner-a") == shown(answers)
    prompted = sorted(
        await sync(lambda: list(WorkPrompt.objects.values_list("object_id", "frame_index")))()
    )
    assert prompted == [(1, 0), (1, 6), (2, 0)]

    # when the correction's points are cleared, its prompt goes and the frame is kept as answered
    answers.append(
        await sync(sessions.clear_points_in_frame)(
            session_id=session_id, frame_index=6, object_id=1
        )
    )
    assert await sync(stored)("owner-a") == shown(answers)
    prompted = sorted(
        await sync(lambda: list(WorkPrompt.objects.values_list("object_id", "frame_index")))()
    )
    assert prompted == [(1, 0), (2, 0)]

    # when an object is removed, it leaves every frame of the store
    await sync(sessions.remove_object)(session_id=session_id, object_id=2)
    kept = await sync(stored)("owner-a")
    assert kept == {key: counts for key, counts in shown(answers).items() if key[1] == 1}
    assert len(kept) == 11  # frame 6 lost object 1's mask with its clicks, as it answered

    # when every point is cleared, nothing of the work is left
    await sync(sessions.clear_points_in_video)(session_id=session_id)
    assert await sync(stored)("owner-a") == {}
    assert await sync(WorkPrompt.objects.count)() == 0
    assert await sync(Work.objects.count)() == 1


def test_a_session_without_an_owner_keeps_nothing(sessions, library_video, video):
    session_id = open_session(sessions, library_video, "")

    sessions.add_points(session_id=session_id, clicks=centre_click(video, 1))

    assert (Work.objects.count(), WorkPrompt.objects.count(), WorkMask.objects.count()) == (0, 0, 0)


def test_each_owner_keeps_its_own_work(sessions, library_video, video):
    # given two owners' sessions on one video
    first = open_session(sessions, library_video, "owner-a")
    second = open_session(sessions, library_video, "owner-b")

    # when each clicks a different object
    sessions.add_points(session_id=first, clicks=centre_click(video, 1))
    sessions.add_points(session_id=second, clicks=centre_click(video, 2))

    # then each work holds its own object alone
    assert sorted(stored("owner-a")) == [(0, 1)]
    assert sorted(stored("owner-b")) == [(0, 2)]


async def test_a_new_session_of_the_owner_starts_with_its_work_and_goes_on_as_the_first(
    sessions, library_video, video
):
    # given an owner's session with two objects clicked and propagated, then closed
    first = await sync(open_session)(sessions, library_video, "owner-a")
    for clicks in (centre_click(video, 1), centre_click(video, 2, frame_index=3)):
        await sync(sessions.add_points)(session_id=first, clicks=clicks)
    propagated_first = await propagated(sessions, first, start=3)
    shown_first = await sync(sessions.annotations)(session_id=first)
    await sync(sessions.close)(session_id=first)

    # when the owner opens a new session on the video
    second = await sync(open_session)(sessions, library_video, "owner-a")

    # then it holds the work at once: every mask and click, without the engine running
    assert await sync(sessions.annotations)(session_id=second) == shown_first
    # and a propagation goes on from it exactly as the first session's did
    assert await propagated(sessions, second, start=3) == propagated_first
    # while another owner's session starts empty
    other = await sync(open_session)(sessions, library_video, "owner-b")
    assert (await sync(sessions.annotations)(session_id=other)).frames == ()


def test_the_work_goes_with_its_video(sessions, library_video, video):
    session_id = open_session(sessions, library_video, "owner-a")
    sessions.add_points(session_id=session_id, clicks=centre_click(video, 1))

    Work.objects.get().video.delete()

    assert (Work.objects.count(), WorkPrompt.objects.count(), WorkMask.objects.count()) == (0, 0, 0)
