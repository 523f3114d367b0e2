"""The HLS output (channels_admin/streaming/hls_output.py) on real MPEG-TS from the demo
encoder, fed in the chunks the hub relays (one per encoded frame)."""

from __future__ import annotations

import io

import av
import pytest

from channels_admin.streaming.hls_output import HlsOutput
from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks
from channels_admin.streaming.ts import TS_PACKET

# 10 frames/s, a key frame every second: segments of exactly 2 s, 20 frames each.
OPTIONS = PatternOptions(width=160, height=96, fps=10, gop_seconds=1.0)
START = 1_700_000_000.0  # the wall clock the output sees: fixed, so dates and numbers are exact


def pattern(seconds: float, options: PatternOptions = OPTIONS) -> list[bytes]:
    return list(pattern_chunks(options, realtime=False, max_seconds=seconds))


def output(**options) -> HlsOutput:
    return HlsOutput(token="t", clock=lambda: START, **options)


def fed(chunks: list[bytes], hls: HlsOutput | None = None) -> HlsOutput:
    hls = hls or output()
    for chunk in chunks:
        hls.feed(chunk)
    return hls


def frames(data: bytes) -> list[av.VideoFrame]:
    with av.open(io.BytesIO(data), format="mpegts") as container:
        return list(container.decode(video=0))


def pids(data: bytes, count: int) -> list[int]:
    return [(data[at + 1] & 0x1F) << 8 | data[at + 2] for at in range(0, count * TS_PACKET, 188)]


def test_segments_are_cut_at_key_frames_every_two_seconds_and_decode_alone():
    # 9 s: four whole segments; the fifth (8-9 s) waits for the key frame that would end it
    hls = fed(pattern(9.0))
    whole = [frame.pts for frame in frames(b"".join(pattern(9.0)))]

    segments = hls.segments

    assert [(s.sequence, s.name, s.duration) for s in segments] == [
        (1_700_000_000, "seg-t-1700000000.ts", 2.0),
        (1_700_000_001, "seg-t-1700000001.ts", 2.0),
        (1_700_000_002, "seg-t-1700000002.ts", 2.0),
        (1_700_000_003, "seg-t-1700000003.ts", 2.0),
    ]
    decoded = [frames(segment.data) for segment in segments]
    assert [len(group) for group in decoded] == [20, 20, 20, 20]
    assert [group[0].key_frame for group in decoded] == [True] * 4
    assert [frame.pts for group in decoded for frame in group] == whole[:80]
    for segment in segments:
        data = segment.data
        assert pids(data, 3) == [0, 0x1000, 0x100]  # PAT, PMT, then the video (FFmpeg's PIDs)
        assert data[2 * TS_PACKET + 5] & 0x40  # whose adaptation field says: random access
        assert segment.starts_with_key


def test_the_playlist_is_a_live_media_playlist():
    hls = fed(pattern(9.0))

    assert hls.playlist().decode() == (
        "#EXTM3U\n"
        "#EXT-X-VERSION:3\n"
        "#EXT-X-TARGETDURATION:2\n"
        "#EXT-X-MEDIA-SEQUENCE:1700000000\n"
        "#EXT-X-DISCONTINUITY-SEQUENCE:0\n"
        "#EXT-X-PROGRAM-DATE-TIME:2023-11-14T22:13:20.000Z\n"
        "#EXTINF:2.000,\n"
        "seg-t-1700000000.ts\n"
        "#EXT-X-PROGRAM-DATE-TIME:2023-11-14T22:13:22.000Z\n"
        "#EXTINF:2.000,\n"
        "seg-t-1700000001.ts\n"
        "#EXT-X-PROGRAM-DATE-TIME:2023-11-14T22:13:24.000Z\n"
        "#EXTINF:2.000,\n"
        "seg-t-1700000002.ts\n"
        "#EXT-X-PROGRAM-DATE-TIME:2023-11-14T22:13:26.000Z\n"
        "#EXTINF:2.000,\n"
        "seg-t-1700000003.ts\n"
    )


def test_nothing_is_listed_before_the_first_segment_closes():
    hls = fed(pattern(1.9))

    assert (hls.playlist(), hls.segments, hls.target_duration) == (None, [], 0)


def test_what_comes_before_the_first_key_frame_is_dropped():
    chunks = pattern(5.0)
    whole = [frame.pts for frame in frames(b"".join(chunks))]
    # joined mid-stream: the first chunks (PAT, PMT and the key frame at 0 s) never came
    hls = fed(chunks[3:])

    decoded = [frames(segment.data) for segment in hls.segments]

    assert [segment.duration for segment in hls.segments] == [2.0]
    assert [(group[0].key_frame, group[0].pts) for group in decoded] == [(True, whole[10])]


def test_a_gop_longer_than_the_target_makes_the_segment():
    hls = fed(pattern(10.0, PatternOptions(width=160, height=96, fps=10, gop_seconds=3.0)))

    assert [segment.duration for segment in hls.segments] == [3.0, 3.0, 3.0]
    assert hls.target_duration == 3
    assert "#EXT-X-TARGETDURATION:3\n" in hls.playlist().decode()


def test_a_stream_without_a_key_frame_in_time_is_cut_at_the_hard_cap():
    # a key frame every 20 s; the cap is 4 s: the segment after the cap starts without one
    options = PatternOptions(width=160, height=96, fps=10, gop_seconds=20.0)
    hls = fed(pattern(21.0, options), output(max_seconds=4.0))

    segments = hls.segments

    assert [(s.duration, s.starts_with_key) for s in segments] == [
        (4.0, True),
        (4.0, False),
        (4.0, False),
        (4.0, False),
        (4.0, False),
    ]
    assert frames(segments[0].data)[0].key_frame


def test_the_window_slides_and_old_segments_stay_a_while():
    hls = fed(pattern(31.0))  # 15 segments; the playlist lists 6, the output keeps 10

    listed = [segment.sequence - 1_700_000_000 for segment in hls.segments]
    text = hls.playlist().decode()

    assert listed == [9, 10, 11, 12, 13, 14]
    assert "#EXT-X-MEDIA-SEQUENCE:1700000009\n" in text
    assert text.count("#EXTINF:") == 6
    assert hls.segment("seg-t-1700000005.ts") is not None  # slid out, still served
    assert hls.segment("seg-t-1700000004.ts") is None  # gone
    assert hls.segment("seg-t-1700000015.ts") is None  # not yet


def test_a_discontinuity_publishes_the_segment_under_way_and_marks_the_next():
    hls = fed(pattern(5.0))
    hls.discontinuity()
    fed(pattern(4.5), hls)

    text = hls.playlist().decode()

    assert [(s.duration, s.discontinuity) for s in hls.segments] == [
        (2.0, False),
        (2.0, False),
        (1.0, False),  # 4-5 s: ten frames, published at the switch
        (2.0, True),
        (2.0, False),
    ]
    assert text.count("#EXT-X-DISCONTINUITY\n") == 1
    assert "#EXT-X-DISCONTINUITY\n#EXT-X-PROGRAM-DATE-TIME" in text
    assert "#EXT-X-DISCONTINUITY-SEQUENCE:0\n" in text
    assert all(frames(segment.data)[0].key_frame for segment in hls.segments)


def test_the_discontinuity_sequence_counts_the_tags_that_slid_out():
    hls = output(window=2, kept=3)
    for _ in range(3):  # three channels of two segments each, then the window moves on
        fed(pattern(4.5), hls)
        hls.discontinuity()
    fed(pattern(4.5), hls)

    text = hls.playlist().decode()

    # segments: A A A' | B B B' | C C C' | D D; listed: the last two, D's; kept: the last three
    assert [s.discontinuity for s in hls.segments] == [True, False]
    assert "#EXT-X-DISCONTINUITY-SEQUENCE:2\n" in text
    assert text.count("#EXT-X-DISCONTINUITY\n") == 1


def test_a_time_line_that_jumps_is_a_discontinuity_without_being_told():
    # the upstream restarted (a reconnect): its timestamps begin again
    hls = fed(pattern(4.5) + pattern(4.5))

    assert [(s.duration, s.discontinuity) for s in hls.segments] == [
        (2.0, False),
        (2.0, False),
        (0.5, False),
        (2.0, True),
        (2.0, False),
    ]


def test_a_reset_forgets_the_segments_and_never_reuses_a_name():
    hls = fed(pattern(5.0))
    names = [segment.name for segment in hls.segments]

    hls.reset()
    gone = (hls.playlist(), hls.segment(names[0]))
    fed(pattern(5.0), hls)

    assert gone == (None, None)
    assert names == ["seg-t-1700000000.ts", "seg-t-1700000001.ts"]
    assert [(s.name, s.discontinuity) for s in hls.segments] == [
        ("seg-t-1700000002.ts", False),
        ("seg-t-1700000003.ts", False),
    ]


def test_the_viewers_are_the_clients_of_the_latest_whole_segments():
    hls = fed(pattern(9.0))
    names = [segment.name for segment in hls.segments]
    for name, clients in zip(names, [5, 4, 3, 1], strict=True):  # the newest: 1 so far
        for _ in range(clients):
            assert hls.segment(name) is not None

    assert hls.viewers == 4  # the second and third newest: 3 and 4
    assert hls.served == 13


def test_tokens_differ_between_outputs():
    first, second = HlsOutput(), HlsOutput()
    for hls in (first, second):
        fed(pattern(2.5), hls)

    assert first.segments[0].name != second.segments[0].name


@pytest.mark.parametrize(("window", "kept"), [(0, 4), (5, 4)])
def test_a_window_must_fit_what_is_kept(window, kept):
    with pytest.raises(ValueError, match=f"need 1 <= window <= kept, got {window} and {kept}"):
        HlsOutput(window=window, kept=kept)
