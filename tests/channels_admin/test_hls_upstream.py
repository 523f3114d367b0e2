"""HLS upstreams end to end: the real server (daphne) reads a real HLS origin on loopback
(loopback_fakes/hls_origin.py) and viewers at /ts get one MPEG-TS stream, which is
decoded here frame by frame."""

from __future__ import annotations

import io
import itertools
import re
import time

import av
import numpy as np
import pytest
from PIL import Image

from loopback_fakes.hls_origin import (
    BACKGROUND,
    FRAMES_PER_SEGMENT,
    HEIGHT,
    SEGMENTS,
    VOD_SEGMENTS,
    WIDTH,
    HlsOrigin,
    frame_index,
)
from tests.channels_admin.stream_client import frames_of, runs, select, status, wait_until, watch
from tests.conftest import running_server

CHANNELS = {
    "idle": "/idle.m3u8",  # answers 404: what plays between tests
    "ts": "/ts/live.m3u8",
    "fmp4": "/fmp4/live.m3u8",
    "aes": "/aes/live.m3u8",
    "aes-iv": "/aes-iv/live.m3u8",
    "sample-aes": "/sample-aes/live.m3u8",
    "gap": "/ts/gap.m3u8",
    "range": "/range/vod.m3u8",
    "master": "/master.m3u8",
    "master-audio": "/master-audio.m3u8",
    "packed": "/packed/live.m3u8",
    "redirect": "/redirect/live.m3u8",
}
USER_AGENT = "TestPlayer/2.0"
COOKIE_JSON = '{"cookie": "session=abc", "user-agent": "overridden by #EXTVLCOPT"}'
PLAYING = """() => {
    const video = document.getElementById("player");
    return video.readyState >= 2 && video.currentTime > 1;
}"""
# Where the picture is inside the video element (object-fit: contain): left, top, width, height
SHOWN = """() => {
    const video = document.getElementById("player");
    const scale = Math.min(video.clientWidth / video.videoWidth,
                           video.clientHeight / video.videoHeight);
    const width = video.videoWidth * scale, height = video.videoHeight * scale;
    return [(video.clientWidth - width) / 2, (video.clientHeight - height) / 2, width, height];
}"""


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    server = HlsOrigin(tmp_path_factory.mktemp("hls-origin"))
    yield server
    server.close()


@pytest.fixture(scope="module")
def server(origin, tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("hls-var")
    lines = ["#EXTM3U"]
    for channel_id, path in CHANNELS.items():
        lines += [f'#EXTINF:-1 tvg-id="{channel_id}",{channel_id}']
        lines += [f"#EXTVLCOPT:http-user-agent={USER_AGENT}", f"#EXTHTTP:{COOKIE_JSON}"]
        lines.append(origin.url(path))
    playlist = var_dir / "channels.m3u"
    playlist.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # null packets while no source plays: what a test decodes is the origin's alone
    with running_server(
        var_dir,
        CHANNELS_PLAYLIST_PATH=str(playlist),
        CHANNELS_STALL_TIMEOUT="2",
        CHANNELS_SLATE="0",
    ) as base_url:
        yield base_url


@pytest.fixture
def fresh(origin, server):
    """The origin's live clock and record start again, then the channel is picked. The idle
    channel comes first, so that no request of the channel before is recorded."""

    def play(channel_id: str) -> None:
        select(server, "idle")
        origin.restart()
        select(server, channel_id)

    return play


def audio_starts(data: bytes) -> list[float]:
    """When each AAC frame of the received TS starts (s); the last, which the viewer may have
    stopped reading inside, left out."""
    with av.open(io.BytesIO(data), format="mpegts") as container:
        stream = container.streams.audio[0]
        packets = [p for p in container.demux(stream) if p.size and p.pts is not None]
        return [float(p.pts * stream.time_base) for p in packets[:-1]]


def playlists_fetched(origin: HlsOrigin) -> list[str]:
    return [path for path in origin.fetched(".m3u8") if path != CHANNELS["idle"]]


def segments_fetched(origin: HlsOrigin) -> list[int]:
    found = (re.search(r"/segment(\d+)\.", r.path) for r in origin.requests)
    return [int(match[1]) for match in found if match]


def test_a_live_ts_playlist_plays_in_order_over_one_connection(origin, server, fresh):
    fresh("ts")
    frames = frames_of(watch(server, 2.0))

    (first, last), *rest = runs(frames)
    assert rest == []
    assert last - first >= 12
    assert first % FRAMES_PER_SEGMENT == 0  # the stream starts at a segment's key frame
    fetched = segments_fetched(origin)
    assert fetched == list(range(fetched[0], fetched[0] + len(fetched)))  # none twice
    # joined three segments before the live edge of the first playlist loaded
    published = next(r.published for r in origin.requests if r.path == "/ts/live.m3u8")
    assert fetched[0] == published - 3
    assert origin.max_open_connections == 1
    assert origin.max_in_flight == 1
    sent = {(r.headers["User-Agent"], r.headers["Cookie"]) for r in origin.requests}
    assert sent == {(USER_AGENT, "session=abc")}  # with every playlist and segment request
    info = status(server)["upstream_info"]
    assert re.fullmatch(r"HLS \d+\.\d Mbit/s, segment \d+", info), info


# "redirect" leads to the slow origin, whose every answer comes in several writes
@pytest.mark.parametrize("channel_id", ["fmp4", "aes", "aes-iv", "redirect"])
def test_fmp4_encrypted_redirected_and_slow_playlists_play_in_order(server, fresh, channel_id):
    fresh(channel_id)
    frames = frames_of(watch(server, 1.5))

    (first, last), *rest = runs(frames)
    assert rest == []
    assert last - first >= 8


def test_a_master_playlist_plays_its_highest_variant_with_video(origin, server, fresh):
    fresh("master")
    wait_until(lambda: status(server)["upstream_info"], what="playing")

    assert playlists_fetched(origin)[:2] == ["/master.m3u8", "/v/2000000/live.m3u8"]
    assert status(server)["upstream_info"].startswith("HLS 160x96, 2.0 Mbit/s, segment ")


def test_a_separate_audio_rendition_is_muxed_with_the_video(origin, server, fresh):
    fresh("master-audio")
    data = watch(server, 2.0)

    (first, last), *rest = runs(frames_of(data))
    assert rest == []
    assert last - first >= 12
    starts = audio_starts(data)
    steps = {round(b - a, 4) for a, b in itertools.pairwise(starts)}
    assert steps == {round(1024 / 48000, 4)}  # every AAC frame, none lost or repeated
    assert starts[-1] - starts[0] >= (last - first) / 10 - 1.0  # as long as the video, nearly
    fetched = playlists_fetched(origin)
    assert fetched[:3] == ["/master-audio.m3u8", "/video/live.m3u8", "/audio/live.m3u8"]
    assert "/other/live.m3u8" not in fetched
    assert origin.max_in_flight == 1


def test_packed_audio_segments_become_one_continuous_audio_stream(server, fresh):
    fresh("packed")
    data = watch(server, 2.0)

    with av.open(io.BytesIO(data), format="mpegts") as container:
        assert [s.type for s in container.streams] == ["audio"]
    starts = audio_starts(data)
    steps = {round(b - a, 4) for a, b in itertools.pairwise(starts)}
    assert steps == {round(1024 / 48000, 4)}  # each segment's clock carried on from the last
    assert starts[-1] - starts[0] >= 1.2


def test_a_discontinuity_goes_on_with_the_new_timestamps(server, fresh):
    fresh("gap")
    frames = frames_of(watch(server, 2 * VOD_SEGMENTS * 0.5 + 1.0))

    last = VOD_SEGMENTS * FRAMES_PER_SEGMENT - 1
    *before, after = runs(frames)
    assert after == (0, last)
    assert len(before) == 1
    assert before[0][1] == last


def test_a_vod_playlist_of_byte_ranges_plays_to_its_end_then_counts_as_ended(origin, server, fresh):
    fresh("range")
    frames = frames_of(watch(server, VOD_SEGMENTS * 0.5 + 1.5))

    assert runs(frames)[-1][1] == VOD_SEGMENTS * FRAMES_PER_SEGMENT - 1
    assert len(runs(frames)) == 1
    wait_until(lambda: status(server)["upstream_down"], what="ended")
    assert status(server)["upstream_detail"] == "the upstream ended the stream"
    time.sleep(1.0)  # reconnects find nothing new to fetch: each range was asked for once
    ranges = [r.headers.get("Range") for r in origin.requests if r.path == "/range/all.ts"]
    assert len(ranges) == VOD_SEGMENTS
    assert ranges[0].startswith("bytes=0-")
    offsets = [int(r.removeprefix("bytes=").split("-")[0]) for r in ranges]
    assert offsets == sorted(set(offsets))


def test_a_missing_segment_is_skipped_and_the_stream_goes_on(origin, server, fresh):
    fresh("idle")
    origin.missing.add(6)  # the channel is joined at segment 1
    select(server, "ts")
    frames = frames_of(watch(server, 3.0))

    (_, before), (after, _) = runs(frames)
    assert (before, after) == (6 * FRAMES_PER_SEGMENT - 1, 7 * FRAMES_PER_SEGMENT)
    assert not status(server)["upstream_down"]


def test_a_stalled_playlist_is_reported_down(origin, server, fresh):
    fresh("ts")
    wait_until(lambda: status(server)["upstream_info"], what="playing")
    origin.stall = True

    wait_until(lambda: status(server)["upstream_down"], timeout=8, what="stall noticed")
    assert status(server)["upstream_detail"] == "the HLS playlist stalled: no new segment for 3 s"


def test_sample_aes_is_refused_with_the_reason(server, fresh):
    fresh("sample-aes")

    wait_until(lambda: status(server)["upstream_down"], what="refused")
    assert status(server)["upstream_detail"] == (
        "HLS encryption SAMPLE-AES is not supported (AES-128 only)"
    )


def test_switching_between_hls_channels_never_opens_two_connections(origin, server, fresh):
    fresh("ts")
    wait_until(lambda: status(server)["upstream_info"], what="playing")
    for channel_id in ("fmp4", "aes", "ts"):
        select(server, channel_id)
        wait_until(lambda: status(server)["upstream_info"], what=f"{channel_id} playing")

    assert origin.max_open_connections == 1
    assert origin.max_in_flight == 1


def test_a_viewer_who_joins_late_starts_at_the_last_key_frame(origin, server, fresh):
    fresh("ts")
    wait_until(lambda: status(server)["upstream_info"], what="playing")
    time.sleep(0.8)  # well inside a later segment

    data = watch(server, 0.8)

    assert (data[1] & 0x1F) << 8 | data[2] == 0  # the PAT comes first
    (first, last), *rest = runs(frames_of(data))
    assert rest == []
    assert first % FRAMES_PER_SEGMENT == 0
    assert last - first >= FRAMES_PER_SEGMENT


def test_the_viewer_page_plays_an_hls_channel(server, fresh, page):
    fresh("fmp4")
    page.goto(f"{server}/tv/")
    page.wait_for_function(PLAYING, timeout=20_000)
    page.shot("playing")

    picture = Image.open(io.BytesIO(page.locator("#player").screenshot())).convert("RGB")
    shown = page.evaluate(SHOWN)
    left, top, width, height = (round(value) for value in shown)
    shown_frame = picture.crop((left, top, left + width, top + height))
    frame = np.asarray(shown_frame.resize((WIDTH, HEIGHT)))
    background = frame[5:30, 10:150].reshape(-1, 3).mean(axis=0)
    assert np.abs(background - BACKGROUND).max() < 12, background
    index = frame_index(np.asarray(Image.fromarray(frame).convert("L")))
    assert 0 < index < SEGMENTS * FRAMES_PER_SEGMENT
    assert "HLS" in page.text_content("#channel-details")
