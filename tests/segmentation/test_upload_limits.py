"""Uploads bounded (issue 36, finding 3): pictures and pixel rates over the limits refused from
the header, decoding in few slots with a short queue, and a disk quota; a refused upload keeps
nothing."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
import requests
from django.test import Client

from segmentation.errors import ServerBusy
from segmentation.models import Video
from segmentation.services.transcode_slots import TranscodeSlots
from tests.conftest import running_server
from tests.segmentation.test_uploads import UPLOAD_VIDEO, stored_files, upload

SHARE = "mutation($file: Upload!) { uploadSharedVideo(file: $file) { path } }"


def black_video(
    path: Path,
    *,
    width: int,
    height: int,
    fps: int = 24,
    frames: int = 2,
    codec: str = "libx264",
    container_format: str = "mp4",
) -> Path:
    """A small file of black frames (H.264 in MP4 unless told): its header claims ``width`` x
    ``height`` at ``fps``, whatever it costs to decode."""
    with av.open(str(path), "w", format=container_format) as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        if codec == "libx264":
            stream.options = {"preset": "ultrafast"}
        frame = av.VideoFrame.from_ndarray(
            np.zeros((height, width, 3), dtype=np.uint8), format="rgb24"
        ).reformat(format="yuv420p")
        for index in range(frames):
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

    assert busy.value.message == (
        "too many uploads at once: 1 being decoded and 1 waiting; try again in 10 s"
    )
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


def test_a_freed_slot_goes_to_the_upload_that_waited_not_to_one_that_just_came():
    slots = TranscodeSlots(parallel=1, queued=2, wait=30)
    order: list[str] = []

    def waiter() -> None:
        with slots.held():
            order.append("waiter")

    # given an upload waiting for the one slot
    with slots.held():
        waiting = threading.Thread(target=waiter)
        waiting.start()
        while slots.waiting == 0:
            threading.Event().wait(0.01)

    # when another comes the moment the slot is freed (a semaphore let it in first)
    with slots.held():
        order.append("newcomer")
    waiting.join(10)

    # then the one that waited went first
    assert order == ["waiter", "newcomer"]
    assert slots.waiting == 0


def post_upload(server: str, video: Path) -> requests.Response:
    operations = {"query": UPLOAD_VIDEO, "variables": {"file": None}}
    return requests.post(
        f"{server}/graphql",
        files={
            "operations": (None, json.dumps(operations)),
            "map": (None, json.dumps({"0": ["variables.file"]})),
            "0": (video.name, video.read_bytes(), "video/mp4"),
        },
        timeout=60,
    )


def test_uploads_past_the_slots_and_the_queue_are_refused_on_the_server(tmp_path: Path):
    # given one slot, one place in the queue, and a first upload that takes half a second
    slow = black_video(tmp_path / "slow.mp4", width=1280, height=720, frames=240)
    quick = [
        black_video(tmp_path / f"quick{n}.mp4", width=64, height=48, frames=n + 2) for n in range(3)
    ]
    var = tmp_path / "var"
    with (
        running_server(
            var, MAX_PARALLEL_TRANSCODES="1", MAX_QUEUED_TRANSCODES="1", UPLOADS_PER_CLIENT="4"
        ) as server,
        ThreadPoolExecutor(4) as senders,
    ):
        first = senders.submit(post_upload, server, slow)
        deadline = time.monotonic() + 30
        while not list((var / "media" / "uploads" / ".preparing").glob("*.mp4")):  # decoding
            assert time.monotonic() < deadline
            time.sleep(0.005)

        # when three more come while it is decoded
        sent = [senders.submit(post_upload, server, video) for video in quick]
        others = [future.result() for future in sent]
        slow_answer = first.result()

        # then the first and one more are stored, the other two refused at once (checked while
        # the server runs: a failure then shows its log)
        answers = [response.json() for response in [slow_answer, *others]]
        stored = [answer["data"]["uploadVideo"]["path"] for answer in answers if answer["data"]]
        refused = [
            (response.headers.get("Retry-After"), response.json()["errors"][0])
            for response in others
            if "errors" in response.json()
        ]
        assert len(stored) == 2, answers
        assert (
            refused
            == [
                (
                    "10",
                    {
                        "message": "too many uploads at once: 1 being prepared and 1 waiting; "
                        "try again in 10 s",
                        "locations": [{"line": 2, "column": 3}],
                        "path": ["uploadVideo"],
                        "extensions": {"code": "SERVER_BUSY", "retryAfter": 10},
                    },
                )
            ]
            * 2
        )
    # and nothing of theirs is kept: the two stored videos, no partial or incoming file
    assert sorted(
        str(path.relative_to(var / "media"))
        for path in (var / "media" / "uploads").rglob("*")
        if path.is_file()
    ) == sorted(stored)


@pytest.mark.django_db
def test_an_mpeg_program_stream_is_checked_from_its_header_too(
    client: Client, media: Path, tmp_path: Path
):
    # an MPEG program stream names its streams only in its packets: the header is read plainly
    mpeg = {"codec": "mpeg2video", "container_format": "mpeg"}
    small = black_video(tmp_path / "small.mpg", width=64, height=48, frames=3, **mpeg)
    large = black_video(tmp_path / "8k.mpg", width=7680, height=4320, frames=1, **mpeg)

    stored = upload(client, UPLOAD_VIDEO, small.read_bytes(), "small.mpg")
    refused = upload(client, UPLOAD_VIDEO, large.read_bytes(), "8k.mpg")

    video = stored["data"]["uploadVideo"]
    assert (video["width"], video["height"]) == (64, 48)
    assert refused["errors"][0]["extensions"] == {"code": "UNSUPPORTED_MEDIA"}
    assert refused["errors"][0]["message"] == (
        "8k.mpg is 7680x4320: pictures of at most 8,847,360 pixels are taken"
    )
    assert Video.objects.count() == 1


def growing_video(path: Path, *, first: tuple[int, int], then: tuple[int, int]) -> Path:
    """An MPEG transport stream of H.264 whose pictures are ``first`` in size for a second (as
    its header says), then ``then``: the stream announces the new size where it begins."""
    annex_b = b""
    for number, ((width, height), frames) in enumerate([(first, 24), (then, 2)]):
        part = black_video(
            path.with_name(f"{path.stem}-{number}.mp4"), width=width, height=height, frames=frames
        )
        with av.open(str(part)) as source:
            stream = source.streams.video[0]
            to_annex_b = av.BitStreamFilterContext("h264_mp4toannexb", stream)
            for packet in [*source.demux(stream), None]:
                annex_b += b"".join(bytes(out) for out in to_annex_b.filter(packet))
    raw = path.with_suffix(".h264")
    raw.write_bytes(annex_b)
    with av.open(str(raw)) as source, av.open(str(path), "w", format="mpegts") as output:
        stream = output.add_stream_from_template(source.streams.video[0])
        packets = [packet for packet in source.demux() if packet.size]
        for index, packet in enumerate(packets):
            packet.stream, packet.time_base = stream, Fraction(1, 24)
            packet.pts = packet.dts = index
            output.mux(packet)
    return path


@pytest.mark.django_db
def test_frames_larger_than_the_header_said_are_refused(
    client: Client, media: Path, settings, tmp_path: Path
):
    grows = growing_video(tmp_path / "grows.ts", first=(64, 48), then=(128, 96))
    settings.MAX_UPLOAD_PIXELS = 64 * 48
    before = stored_files(media)

    result = upload(client, UPLOAD_VIDEO, grows.read_bytes(), "grows.ts")

    assert result["errors"][0]["extensions"] == {"code": "UNSUPPORTED_MEDIA"}
    assert result["errors"][0]["message"] == (
        "grows.ts has a frame of 128x96 where its header says 64x48: pictures of at most 3,072 "
        "pixels are taken"
    )
    assert stored_files(media) == before
    assert not Video.objects.exists()
