"""The HLS output end to end: the real server (daphne) playing its own demo channel, its
playlist and segments over HTTP, and PyAV (FFmpeg's HLS demuxer) as a live HLS client."""

from __future__ import annotations

import re

import av
import pytest
import requests

from tests.channels_admin.stream_client import select, status, wait_until
from tests.conftest import free_port, running_server

# signed for link 0 while the stream is open (nginx in front checks every segment request)
SEGMENT = re.compile(r"^(seg-[0-9a-f]{8}-\d+\.ts)\?l=0&e=\d+&s=[A-Za-z0-9_-]{22}$", re.MULTILINE)


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("hls-var")


@pytest.fixture(scope="module")
def server(var_dir):
    port = free_port()
    with running_server(var_dir, port=port, SERVER_URL=f"http://127.0.0.1:{port}") as base_url:
        yield base_url


def playlist(server: str) -> requests.Response:
    return requests.get(f"{server}/hls/live.m3u8", timeout=5)


def playing(server: str, timeout: float = 15.0) -> str:
    """The playlist's text once it lists at least two segments."""
    wait_until(
        lambda: len(SEGMENT.findall(playlist(server).text)) >= 2,
        timeout=timeout,
        what="two segments",
    )
    return playlist(server).text


def test_no_playlist_before_a_channel_is_selected(server):
    answer = playlist(server)
    missing = requests.get(f"{server}/hls/seg-00000000-1.ts", timeout=5)

    assert (answer.status_code, answer.text) == (
        503,
        "no channel selected: an administrator must pick one first",
    )
    assert {name: answer.headers[name] for name in ("Content-Type", "Cache-Control")} == {
        "Content-Type": "text/plain; charset=utf-8",
        "Cache-Control": "no-store",
    }
    assert answer.headers["Retry-After"] == "5"
    assert (missing.status_code, missing.text) == (404, "segment not found")


def test_the_playlist_and_its_segments_are_served_with_their_cache_headers(server):
    select(server, "demo.1")

    text = playing(server)
    names = SEGMENT.findall(text)
    answer = playlist(server)
    segment = requests.get(f"{server}/hls/{names[-1]}", timeout=5)
    head = requests.head(f"{server}/hls/{names[-1]}", timeout=5)
    posted = requests.post(f"{server}/hls/live.m3u8", timeout=5)

    assert text.startswith("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n")
    assert "#EXTINF:2.000,\n" in text  # the demo channel's key frames come every second
    assert {k: answer.headers[k] for k in ("Content-Type", "Cache-Control", "Content-Length")} == {
        "Content-Type": "application/vnd.apple.mpegurl",
        "Cache-Control": "public, max-age=1",
        "Content-Length": str(len(answer.content)),
    }
    assert answer.headers["Access-Control-Allow-Origin"] == "*"
    assert segment.status_code == 200
    assert {k: segment.headers[k] for k in ("Content-Type", "Cache-Control", "Content-Length")} == {
        "Content-Type": "video/mp2t",
        "Cache-Control": "public, max-age=3600, immutable",
        "Content-Length": str(len(segment.content)),
    }
    assert segment.headers["Access-Control-Allow-Origin"] == "*"
    assert (segment.content[0], len(segment.content) % 188) == (0x47, 0)  # whole packets
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["Content-Length"] == str(len(segment.content))
    assert (posted.status_code, posted.text, posted.headers["Allow"]) == (
        405,
        "method not allowed",
        "GET, HEAD",
    )


def test_a_live_hls_client_decodes_the_channel(server):
    select(server, "demo.1")
    playing(server)

    with av.open(f"{server}/hls/live.m3u8", options={"rw_timeout": "10000000"}) as container:
        frames = []
        for frame in container.decode(video=0):
            frames.append(frame)
            if len(frames) == 60:
                break

    assert len(frames) == 60
    assert frames[0].key_frame
    assert (frames[0].width, frames[0].height) == (640, 360)
    assert frames[-1].pts > frames[0].pts


def test_hls_clients_count_as_viewers(server):
    select(server, "demo.1")
    fetched_before = set(SEGMENT.findall(playing(server)))  # other tests' clients fetched these

    def three_new() -> bool:  # a playlist begun again after the switch may hold fewer yet
        names = SEGMENT.findall(playlist(server).text)
        return len(names) >= 3 and names[-3] not in fetched_before

    wait_until(three_new, timeout=15, what="three new segments")
    names = SEGMENT.findall(playlist(server).text)
    for _ in range(3):  # three clients of the second and third newest
        for name in names[-3:-1]:
            assert requests.get(f"{server}/hls/{name}", timeout=5).status_code == 200

    counted = status(server)

    assert (counted["hls_viewers"], counted["viewers"]) == (3, 3)


def entries(text: str) -> list[tuple[int, bool]]:
    """The playlist's segments: (media sequence, whether a discontinuity comes before it)."""
    found, discontinuity = [], False
    for line in text.splitlines():
        if line == "#EXT-X-DISCONTINUITY":
            discontinuity = True
        elif match := SEGMENT.match(line):
            found.append((int(match[1].rsplit("-", 1)[1][: -len(".ts")]), discontinuity))
            discontinuity = False
    return found


def test_a_switch_is_a_discontinuity_and_numbers_go_on(server):
    select(server, "demo.1")
    playing(server)

    select(server, "demo.2")  # answered once the hub has switched
    switched = entries(playlist(server).text)[-1][0]  # the old channel's last, published
    wait_until(
        lambda: entries(playlist(server).text)[-1][0] >= switched + 2,
        timeout=15,
        what="two segments of the new channel",
    )
    text = playlist(server).text
    after = entries(text)

    sequences = [sequence for sequence, _ in after]
    assert sequences == list(range(sequences[0], sequences[0] + len(sequences)))
    assert [flag for sequence, flag in after if sequence > switched] == [True, False]
    assert int(text.split("#EXT-X-MEDIA-SEQUENCE:")[1].split()[0]) == sequences[0]


def test_an_hls_client_alone_starts_the_hub_after_a_restart(server, var_dir):
    # given the live channel in the database, and a second process that has served no one
    select(server, "demo.1")
    with running_server(var_dir, log_name="second.log", SERVER_URL=server) as second:
        # when an HLS client asks it for the playlist first (its hub does not exist yet)
        first = playlist(second)
        text = playing(second)

    # then the playlist's request built the hub, which resumed the channel
    assert (first.status_code, first.text) == (503, "the channel is starting: no segment yet")
    assert first.headers["Retry-After"] == "2"
    assert len(SEGMENT.findall(text)) >= 2
