"""The exports of a session that keeps its work, streamed from the store
(services/work_exports.py): the same files as the session's engine state and the POSTed
conversions give, memory that does not grow with the frames, the export processes' line, and
the refusals."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import threading
import tracemalloc
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from asgiref.sync import sync_to_async as sync
from django.test import AsyncClient

from core.processes import ProcessPool
from core.threads import Stopped
from segmentation import selectors
from segmentation.models import Video, Work, WorkMask
from segmentation.rle import rle_encode
from segmentation.services import exports, work_exports
from segmentation.services.local_sessions import local_sessions
from segmentation.services.session_types import Clicks
from segmentation.services.videos import media_path
from segmentation.services.work_exports import (
    MASKS,
    WorkExport,
    work_annotations_json,
    work_converted,
)
from tests.core.process_calls import busy
from tests.segmentation.synthetic import HEIGHT, WIDTH
from tests.segmentation.test_work_store import centre_click
from tests.timing import until

pytestmark = pytest.mark.django_db(transaction=True)

CONVERSIONS = ["masks.zip", "coco.json", "yolo.zip"]


@pytest.fixture
def sessions():
    local_sessions.cache_clear()
    yield local_sessions()
    local_sessions().registry.close_idle()
    local_sessions.cache_clear()


@pytest.fixture
def pool(monkeypatch) -> Iterator[ProcessPool]:
    """Export processes of the test's own, so that a child's peak memory is this test's."""
    pool = ProcessPool(size=1, queued=0, niceness=10, idle_sec=30)
    monkeypatch.setattr(exports, "export_processes", lambda: pool)
    monkeypatch.setattr(work_exports, "export_processes", lambda: pool)
    yield pool
    pool.close()


async def worked_session(sessions, library_video: str, video, owner: str = "owner-a") -> str:
    """A session of ``owner`` with two objects clicked and propagated, a correction on frame 6,
    and a third object clicked where its mask is empty (a background click alone)."""
    session_id = await sync(sessions.open)(
        video_path=library_video, file=str(media_path(library_video)), owner=owner
    )
    for clicks in (centre_click(video, 1), centre_click(video, 2, frame_index=3)):
        await sync(sessions.add_points)(session_id=session_id, clicks=clicks)
    propagation = await sessions.propagation(session_id=session_id, start_frame_index=0)
    assert len([frame async for frame in propagation.frames]) == 12
    await sync(sessions.add_points)(session_id=session_id, clicks=centre_click(video, 1, 6))
    background = Clicks(4, 3, [[0.01, 0.01]], [0], clear_old_points=True)
    answer = await sync(sessions.add_points)(session_id=session_id, clicks=background)
    assert [item.object_id for item in answer.objects] == [1, 2, 3]
    return session_id


async def body(response) -> bytes:
    if not response.streaming:
        return response.content
    return b"".join([piece async for piece in response.streaming_content])


def members(archive: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(archive)) as zip_file:
        return [(name, zip_file.read(name)) for name in zip_file.namelist()]


async def test_the_stored_annotation_file_is_the_sessions_export_streamed(
    sessions, library_video, video
):
    # given a session that keeps its work, clicked, propagated, corrected
    session_id = await worked_session(sessions, library_video, video)
    expected = (await sync(sessions.annotations)(session_id=session_id)).as_message()

    # when its annotation file is downloaded
    response = await AsyncClient().get(f"/annotations/{session_id}.json")

    # then it is streamed from the store, and is the engine state's export, number for number
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="shapes-annotations.json"'
    exported = json.loads(await body(response))
    assert exported == expected
    assert [frame["frame_index"] for frame in exported["frames"]] == list(range(12))
    # the background click's object has its clicks and its empty mask on frame 4 alone
    clicked = [item for item in exported["frames"][4]["objects"] if item["object_id"] == 3]
    assert clicked == [
        {
            "object_id": 3,
            "mask": rle_encode(np.zeros((HEIGHT, WIDTH), bool)),
            "points": [[0.01, 0.01]],
            "labels": [0],
        }
    ]


@pytest.mark.parametrize("name", CONVERSIONS)
async def test_a_streamed_conversion_is_the_posted_conversion_of_the_same_annotations(
    sessions, library_video, video, name
):
    # given a session that keeps its work, and its annotation file as the engine state gives it
    session_id = await worked_session(sessions, library_video, video)
    annotations = (await sync(sessions.annotations)(session_id=session_id)).as_message()
    client = AsyncClient()
    posted = await client.post(
        f"/annotations/{name}", json.dumps(annotations), content_type="application/json"
    )
    assert posted.status_code == 200

    # when the conversion is asked for from the store
    response = await client.get(f"/annotations/{session_id}/{name}")

    # then it is streamed, named and typed as the posted one, with the same contents
    assert response.status_code == 200
    assert response.streaming
    for header in ("Content-Type", "Content-Disposition"):
        assert response[header] == posted[header]
    streamed = await body(response)
    if name.endswith(".zip"):  # member for member (the zips differ in their headers' times)
        assert members(streamed) == members(posted.content)
        assert len(members(streamed)) == {"masks.zip": 12, "yolo.zip": 14}[name]
    else:
        assert streamed == posted.content
        assert len(json.loads(streamed)["annotations"]) == 24


async def test_a_session_without_work_exports_its_engine_state_and_has_no_streamed_conversion(
    sessions, library_video, video
):
    # given a session opened for no owner, clicked
    session_id = await sync(sessions.open)(
        video_path=library_video, file=str(media_path(library_video))
    )
    await sync(sessions.add_points)(session_id=session_id, clicks=centre_click(video, 1))
    expected = (await sync(sessions.annotations)(session_id=session_id)).as_message()
    client = AsyncClient()

    # then its annotation file is made from its engine state, as before
    response = await client.get(f"/annotations/{session_id}.json")
    assert (response.status_code, response.streaming) == (200, False)
    assert response.json() == expected
    # and a conversion is the POSTed one's to make
    for name in CONVERSIONS:
        response = await client.get(f"/annotations/{session_id}/{name}")
        assert (response.status_code, response.json()) == (
            400,
            {
                "error": f"session {session_id} keeps no work on the server (it was opened "
                "without a cookie session): POST its annotation file to the conversion instead",
                "code": "BAD_USER_INPUT",
            },
        )


@pytest.mark.parametrize("name", ["annotations.json", *CONVERSIONS])
async def test_an_unknown_session_is_not_found(sessions, name):
    path = (
        "/annotations/nosuch.json" if name == "annotations.json" else f"/annotations/nosuch/{name}"
    )

    response = await AsyncClient().get(path)

    assert (response.status_code, response.json()) == (
        404,
        {"error": "no session with id 'nosuch'", "code": "SESSION_NOT_FOUND"},
    )


@pytest.mark.parametrize("name", CONVERSIONS)
async def test_a_conversion_is_get_only(sessions, library_video, video, name):
    session_id = await worked_session(sessions, library_video, video)

    response = await AsyncClient().post(f"/annotations/{session_id}/{name}")

    assert response.status_code == 405
    assert await sync(WorkMask.objects.count)() > 0


async def test_an_object_no_label_png_holds_is_refused_before_the_first_byte(
    sessions, library_video, video
):
    # given a kept work with an object 256 on frame 2
    session_id = await worked_session(sessions, library_video, video)
    work_id = sessions.work(session_id=session_id)
    await sync(WorkMask.objects.create)(
        work_id=work_id,
        frame_index=2,
        object_id=256,
        counts=rle_encode(np.ones((HEIGHT, WIDTH), bool))["counts"],
    )

    response = await AsyncClient().get(f"/annotations/{session_id}/masks.zip")

    assert (response.status_code, response.json()) == (
        400,
        {
            "error": "object ID 256 cannot be a pixel value of a label PNG (1..255)",
            "code": "BAD_USER_INPUT",
        },
    )


async def test_past_the_exports_line_a_streamed_export_is_refused_busy(
    sessions, library_video, video, pool
):
    # given one export process, converting, and no room to wait
    session_id = await worked_session(sessions, library_video, video)
    stop = threading.Event()

    def hold() -> None:
        with contextlib.suppress(Stopped):
            pool.call(busy, stop=stop, seconds=30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        await sync(until)(lambda: pool.turns.holding == 1)

        response = await AsyncClient().get(f"/annotations/{session_id}/coco.json")

        assert (response.status_code, response.json(), response["Retry-After"]) == (
            503,
            {
                "error": "too many exports at once: 1 being converted and 0 waiting; "
                "try again in 1 s",
                "code": "SERVER_BUSY",
            },
            "1",
        )
    finally:
        stop.set()
        holder.join(10)


# ---- memory, whatever the length


def long_work(media: Path, frames: int) -> WorkExport:
    """A work of ``frames`` frames of two objects each, a disk moving across the frame and a
    box (rows inserted directly: the video's file is never read by an export), on a video that
    long."""
    video = Video.objects.create(
        path=f"gallery/long-{frames}.mp4",
        poster_path="",
        width=WIDTH,
        height=HEIGHT,
        fps=24.0,
        frame_count=frames,
        duration=frames / 24,
        sha256="",
        origin=Video.Origin.GALLERY,
    )
    work = Work.objects.create(video=video, owner=f"long-{frames}")
    box = np.zeros((HEIGHT, WIDTH), bool)
    box[100:200, 50:150] = True
    box_counts = rle_encode(box)["counts"]
    rows = []
    for index in range(frames):
        x = 200 + (index * 7) % 400
        rows.append(WorkMask(work=work, frame_index=index, object_id=1, counts=box_counts))
        rows.append(WorkMask(work=work, frame_index=index, object_id=2, counts=disk_counts(x)))
    WorkMask.objects.bulk_create(rows, batch_size=2000)
    return WorkExport(work_id=work.id, video_path=video.path, video=video.shape)


@functools.cache
def disk_counts(x: int) -> str:
    """The RLE counts of the disk centred at column ``x``: a work's disk passes the same 400
    places again and again, and drawing and encoding each frame's afresh took about 1.5 s of
    a core over this module's works."""
    ys, xs = np.mgrid[:HEIGHT, :WIDTH]
    return rle_encode((ys - 120) ** 2 + (xs - x) ** 2 <= 60**2)["counts"]


def peak_kib(pid: int) -> int:
    """A process's peak resident memory (``VmHWM``), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


def measured(export: WorkExport, pool: ProcessPool) -> tuple[int, int, int]:
    """The DAVIS archive's size, this process's peak of Python allocations while it streamed
    it (the pieces dropped as they come, as the server sends them on), and the export
    process's peak resident memory, in bytes."""
    stop = threading.Event()
    size = 0
    tracemalloc.start()
    try:
        for piece in work_converted(export=export, conversion=MASKS, stop=stop):
            size += len(piece)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (child,) = pool._idle
    return size, peak, peak_kib(child.process.pid) * 1024


# Frames of the two works the DAVIS archive's memory is compared on: enough more PNGs in the
# longer that keeping them would show, few enough for the suite (the PNGs are made in a child
# process, and the short work's 1,000 and the long one's 5,000 took 1 to 6 minutes). The rows
# are read 200 at a time, so that each work spans several reads, as an hour's does.
SHORT_FRAMES, LONG_FRAMES = 300, 2000
READ_ROWS = 200


def test_a_long_works_export_streams_in_memory_that_does_not_grow_with_its_frames(media):
    short, long = long_work(media, SHORT_FRAMES), long_work(media, LONG_FRAMES)
    figures = {}
    for export in (short, long):
        pool = ProcessPool(size=1, queued=0, niceness=10, idle_sec=30)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(work_exports, "export_processes", lambda pool=pool: pool)
            patch.setattr(selectors, "WORK_READ_ROWS", READ_ROWS)
            try:
                figures[export.video.frame_count] = measured(export, pool)
            finally:
                pool.close()
    (short_size, short_peak, short_child), (long_size, long_peak, long_child) = (
        figures[SHORT_FRAMES],
        figures[LONG_FRAMES],
    )
    print(f"\nDAVIS ZIP (size, this process's peak, the export process's peak): {figures}")
    # the archive grows with the frames: 1,700 more frames are over 2 MB more of PNGs
    assert long_size - short_size > 2 * 2**20
    # while the server's side holds a few pieces at a time, the same for either
    assert short_peak < 4 * 2**20
    assert long_peak < short_peak + 2**20
    # and the export process grows by its archive's directory alone (zipfile's record of each
    # member, about 350 bytes: 0.6 MB; the PNGs are not kept: they would be 2 MB more)
    assert long_child - short_child < 2**20


def test_a_long_works_annotation_file_streams_in_memory_that_does_not_grow_with_its_frames(
    media,
):
    peaks = {}
    for frames in (1000, 5000):
        export = long_work(media, frames)
        tracemalloc.start()
        try:
            size = sum(len(piece) for piece in work_annotations_json(export=export))
            _, peaks[frames] = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert size > frames * 100
    assert peaks[1000] < 2 * 2**20
    assert peaks[5000] < peaks[1000] + 2**20, peaks


def children() -> set[int]:
    """This process's children that it has not reaped."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            found.update(int(child) for child in (task / "children").read_text().split())
    return found


@pytest.mark.parametrize("how", ["closed", "stopped"])
def test_a_streamed_export_whose_reader_goes_kills_its_process(media, pool, how):
    # given a long work's export under way, its process paused by a reader that reads no more
    export = long_work(media, 1000)
    before = children()
    stop = threading.Event()
    pieces = work_converted(export=export, conversion=MASKS, stop=stop)
    next(pieces)
    (child,) = children() - before

    # when its reader goes away (the server closes the stream, or its client's stop is set)
    if how == "closed":
        pieces.close()
    else:
        stop.set()
        with pytest.raises(Stopped):
            list(pieces)

    # then its process is killed and reaped, and its turn is free for the next export
    assert child not in children()
    assert not Path(f"/proc/{child}").exists()
    assert (pool.turns.holding, pool._idle) == (0, [])
