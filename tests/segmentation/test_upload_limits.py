"""Uploads bounded (issue 36, finding 3): pictures and pixel rates over the limits refused from
the header, decoding in few slots with a short queue, and a disk quota; a refused upload keeps
nothing."""

from __future__ import annotations

import threading
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from django.test import Client

from segmentation.errors import ServerBusy
from segmentation.models import Video
from segmentation.services.transcode_slots import TranscodeSlots
from tests.segmentation.test_uploads import UPLOAD_VIDEO, stored_files, upload

SHARE = "mutation($file: Upload!) { uploadSharedVideo(file: $file) { path } }"


def black_video(path: Path, *, width: int, height: int, fps: int = 24, frames: int = 2) -> Path:
    """A small H.264 file of black frames: its header claims ``width`` x ``height`` at
    ``fps``, whatever it costs to decode."""
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast"}
        black = np.zeros((height, width, 3), dtype=np.uint8)
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(black, format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, fps)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@pytest.fixture(scope="module")
def eight_k(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return black_video(
        tmp_path_factory.mktemp("8k") / "8k.mp4", width=7680, height=4320, frames=1
    ).read_bytes()


@pytest.mark.django_db
@pytest.mark.parametrize("query", [UPLOAD_VIDEO, SHARE], ids=["upload", "share"])
def test_an_8k_video_is_refused_from_its_header(client: Client, media: Path, eight_k, query):
    before = stored_files(media)

    result = upload(client, query, eight_k, "8k.mp4")

    assert result["errors"][0]["extensions"] == {"code": "UNSUPPORTED_MEDIA"}
    assert result["errors"][0]["message"] == (
        "8k.mp4 is 7680x4320: pictures of at most 8,847,360 pixels are taken"
    )
    assert stored_files(media) == before
    assert not Video.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("query", [UPLOAD_VIDEO, SHARE], ids=["upload", "share"])
def test_a_pixel_rate_over_the_limit_is_refused(
    client: Client, media: Path, settings, tmp_path, query
):
    fast = black_video(tmp_path / "fast.mp4", width=64, height=64, fps=240, frames=4)
    settings.MAX_UPLOAD_PIXEL_RATE = 64 * 64 * 100
    before = stored_files(media)

    result = upload(client, query, fast.read_bytes(), "fast.mp4")

    assert result["errors"][0]["extensions"] == {"code": "UNSUPPORTED_MEDIA"}
    assert result["errors"][0]["message"] == (
        "fast.mp4 is 64x64 at 240 frames a second: at most 409,600 pixels a second are taken"
    )
    assert stored_files(media) == before


@pytest.mark.django_db
def test_past_the_quota_an_upload_is_refused_and_nothing_is_kept(
    client: Client, media: Path, settings, video_file: Path, tmp_path
):
    other = black_video(tmp_path / "other.mp4", width=64, height=48).read_bytes()
    first = upload(client, UPLOAD_VIDEO, video_file.read_bytes(), "first.mp4")
    used = sum(
        file.stat().st_size
        for folder in ("uploads", "shared")
        for file in (media / folder).glob("*.mp4")
    )
    kept = stored_files(media)

    # the uploads take the whole quota: refused before any decoding
    settings.MEDIA_QUOTA_BYTES = used
    full = [upload(client, query, other, "other.mp4") for query in (UPLOAD_VIDEO, SHARE)]
    # ten bytes to spare: refused once the new file's size is known
    settings.MEDIA_QUOTA_BYTES = used + 10
    short = [upload(client, query, other, "other.mp4") for query in (UPLOAD_VIDEO, SHARE)]

    assert first["data"]["uploadVideo"]["path"].startswith("uploads/")
    message = (
        f"the uploads take {used / 2**20:.1f} MB of their {{quota}} MB; delete some "
        "(manage.py delete_user_data) or raise MEDIA_QUOTA_MB"
    )
    for refused in full + short:
        assert refused["errors"][0]["extensions"] == {"code": "STORAGE_FULL"}
    assert [refused["errors"][0]["message"] for refused in full] == [
        message.format(quota=f"{used / 2**20:.0f}")
    ] * 2
    assert stored_files(media) == kept
    assert Video.objects.count() == 1


def test_uploads_wait_in_a_short_queue_for_few_slots():
    slots = TranscodeSlots(parallel=1, queued=1, wait=30)
    held, release, waited = threading.Event(), threading.Event(), threading.Event()
    outcomes: list[str] = []

    def first() -> None:
        with slots.held():
            held.set()
            release.wait(10)

    def second() -> None:
        with slots.held():
            outcomes.append("second ran")
        waited.set()

    threading.Thread(target=first).start()
    held.wait(10)
    waiting = threading.Thread(target=second)
    waiting.start()
    while slots.waiting == 0:  # the second is in the queue
        threading.Event().wait(0.01)

    # when a third comes with the one slot taken and the queue full
    with pytest.raises(ServerBusy) as busy, slots.held():
        outcomes.append("third ran")
    release.set()
    waited.wait(10)

    assert busy.value.message == ("1 uploads are already waiting to be decoded; try again in 10 s")
    assert busy.value.retry_after == 10
    assert outcomes == ["second ran"]


def test_an_upload_that_waits_too_long_is_refused():
    slots = TranscodeSlots(parallel=1, queued=4, wait=0.2)
    held, release = threading.Event(), threading.Event()

    def first() -> None:
        with slots.held():
            held.set()
            release.wait(10)

    threading.Thread(target=first).start()
    held.wait(10)
    try:
        with pytest.raises(ServerBusy) as busy, slots.held():
            pass
    finally:
        release.set()

    assert busy.value.message == (
        "the upload waited 0.2 s for its turn to be decoded; try again in 10 s"
    )
