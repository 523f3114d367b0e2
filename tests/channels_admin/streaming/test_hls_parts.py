"""The parts of the HLS reader (channels_admin/streaming/hls_input.py) that decide without a
network."""

from __future__ import annotations

import time

import m3u8
import pytest

from channels_admin.streaming.hls_input import (
    SPREAD,
    HlsError,
    SegmentSpreader,
    byteranges,
    looks_like_hls,
    segment_decrypt,
    sequence_iv,
    variant_pick,
)
from loopback_fakes.hls_origin import KEY, encrypt

MASTER = """#EXTM3U
#EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,CODECS="avc1.4d401e,mp4a.40.2"
low.m3u8
#EXT-X-STREAM-INF:BANDWIDTH=3000000,RESOLUTION=1280x720
high.m3u8
#EXT-X-STREAM-INF:BANDWIDTH=1500000,CODECS="hvc1.1.6.L93.B0"
mid.m3u8
#EXT-X-STREAM-INF:BANDWIDTH=6000000,CODECS="mp4a.40.2"
radio.m3u8
"""


def picked(max_bandwidth: int | None, text: str = MASTER) -> str:
    master = m3u8.loads(text, uri="http://origin.test/tv/master.m3u8")
    return variant_pick(master, max_bandwidth).absolute_uri


def test_the_highest_variant_with_video_is_played():
    assert picked(None) == "http://origin.test/tv/high.m3u8"


def test_a_bandwidth_cap_picks_the_highest_variant_within_it():
    assert picked(2_000_000) == "http://origin.test/tv/mid.m3u8"
    assert picked(1_000_000) == "http://origin.test/tv/low.m3u8"


def test_a_cap_below_every_variant_picks_the_lowest():
    assert picked(100_000) == "http://origin.test/tv/low.m3u8"


def test_an_audio_only_master_plays_audio():
    text = '#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS="mp4a.40.2"\na.m3u8\n'
    assert picked(None, text) == "http://origin.test/tv/a.m3u8"


def test_a_master_without_variants_is_an_error():
    with pytest.raises(HlsError, match=r"^the HLS master playlist lists no variant$"):
        picked(None, "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=a,NAME=x,URI=a.m3u8\n")


@pytest.mark.parametrize(
    ("content_type", "head", "expected"),
    [
        ("application/vnd.apple.mpegurl", b"", True),
        ("application/x-mpegURL; charset=utf-8", b"", True),
        ("text/plain", b"\xef\xbb\xbf#EXTM3U\n#EXT-X-TARGETDURATION:6\n", True),
        ("application/octet-stream", b"\r\n#EXTM3U\n", True),
        ("video/mp2t", b"\x47\x40\x00\x10", False),
        ("text/html", b"<html>", False),
    ],
)
def test_hls_is_told_by_the_content_type_or_the_body(content_type, head, expected):
    assert looks_like_hls(content_type, head) is expected


def test_byte_ranges_without_an_offset_follow_the_previous_range_of_the_same_file():
    playlist = m3u8.loads(
        "#EXTM3U\n#EXT-X-TARGETDURATION:2\n"
        "#EXTINF:2,\n#EXT-X-BYTERANGE:1000@500\nall.ts\n"
        "#EXTINF:2,\n#EXT-X-BYTERANGE:700\nall.ts\n"
        "#EXTINF:2,\nwhole.ts\n"
        "#EXTINF:2,\n#EXT-X-BYTERANGE:300\nother.ts\n"
    )

    assert byteranges(playlist.segments) == [(500, 1000), (1500, 700), None, (0, 300)]


def test_aes_128_segments_decrypt_with_explicit_and_sequence_ivs():
    data = bytes(range(256)) * 7
    assert segment_decrypt(encrypt(data, sequence_iv(18422)), KEY, sequence_iv(18422)) == data
    assert sequence_iv(258) == bytes(14) + b"\x01\x02"


def test_a_wrong_key_is_an_error_that_says_so():
    sealed = encrypt(b"x" * 1000, sequence_iv(1))
    with pytest.raises(
        HlsError, match=r"^an HLS segment could not be decrypted \(wrong key or IV\?\)$"
    ):
        segment_decrypt(sealed, bytes(16), sequence_iv(1))


# How late a wake-up may come: the suite's other workers share the cores (one came 67 ms late),
# and a pacer off by a slice or more is later still.
SLACK = 0.15


async def released(
    pacer: SegmentSpreader, data: bytes, duration: float
) -> list[tuple[float, bytes]]:
    """Each chunk the pacer gives out, with when (monotonic seconds)."""
    return [(time.monotonic(), piece) async for piece in pacer.release(data, duration)]


async def test_the_joins_segments_go_out_whole_at_once():
    segments = [bytes([n]) * 188 * 1000 for n in range(3)]
    pacer, started = SegmentSpreader(lead=10.0, burst=3), time.monotonic()
    pieces = [piece for segment in segments for piece in await released(pacer, segment, 1.0)]

    assert [piece for _, piece in pieces] == segments
    assert all(at - started < SLACK for at, _ in pieces)


async def test_a_later_live_segment_is_spread_over_most_of_its_duration():
    segment = bytes(range(188)) * 1394 + b"tail"  # 262,076 bytes: four slices of 64 KiB
    pacer, started = SegmentSpreader(lead=10.0, burst=0), time.monotonic()
    pieces = await released(pacer, segment, 0.4)

    assert [len(piece) for _, piece in pieces] == [65424, 65612, 65424, 65616]
    assert b"".join(piece for _, piece in pieces) == segment
    # slice k when k quarters of SPREAD of 0.4 s have passed, never before
    lateness = [at - started - SPREAD * 0.1 * k for k, (at, _) in enumerate(pieces)]
    assert all(0 <= late < SLACK for late in lateness), lateness


DUE = [0.0, 0.1, 0.2, 0.3, 0.4]


async def test_media_ahead_of_the_clock_goes_out_at_the_pace_of_its_duration():
    segment = bytes(range(188)) * 1394 + b"tail"
    pacer, started = SegmentSpreader(lead=0.0, burst=2), time.monotonic()
    pieces = await released(pacer, segment, 0.4)  # four slices of 0.1 s
    pieces += await released(pacer, b"\x47" * 188, 0.1)

    assert [len(piece) for _, piece in pieces] == [65424, 65612, 65424, 65616, 188]
    assert b"".join(piece for _, piece in pieces[:4]) == segment
    # each slice when its media is due, never before (a pacer at half speed would be 0.3 s late)
    lateness = [at - started - due for (at, _), due in zip(pieces, DUE, strict=True)]
    assert all(0 <= late < SLACK for late in lateness), lateness
