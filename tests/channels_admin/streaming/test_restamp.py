"""One time line across sources: the next stream's timestamps go on from the last ones sent."""

from __future__ import annotations

import io
import itertools

import av

from channels_admin.streaming.restamp import STEP, WRAP, Restamper
from channels_admin.streaming.ts import TS_PACKET
from loopback_fakes.media_upstream import Look, clip

CHUNK = 50 * TS_PACKET


def fed(restamper: Restamper, data: bytes) -> bytes:
    return b"".join(restamper.feed(data[at : at + CHUNK]) for at in range(0, len(data), CHUNK))


def stamps(data: bytes, kind: str) -> list[int]:
    with av.open(io.BytesIO(data), format="mpegts") as container:
        stream = getattr(container.streams, kind)[0]
        return [p.pts for p in container.demux(stream) if p.pts is not None]


def test_the_next_stream_goes_on_a_step_after_the_last_timestamp_sent():
    first, second = clip(12.0, Look(width=320)), clip(12.0, Look(width=384))
    half = len(first) // 2 // TS_PACKET * TS_PACKET
    restamper = Restamper()

    before = fed(restamper, first[:half])
    restamper.begin()
    after = fed(restamper, second)

    assert before == first[:half]  # the first stream's own timestamps go out as they are
    sent = max(stamps(before, "video") + stamps(before, "audio"))
    video, audio = stamps(after, "video"), stamps(after, "audio")
    # the new stream's earliest timestamp (its audio) a step after the last sent, and every
    # other shifted by as much
    assert min(video + audio) == sent + STEP
    offset = video[0] - stamps(second, "video")[0]
    assert [pts - offset for pts in video] == stamps(second, "video")
    assert [pts - offset for pts in audio] == stamps(second, "audio")


def pcrs(data: bytes) -> list[int]:
    """The PCR base of every packet that carries one, in order."""
    found = []
    for at in range(0, len(data), TS_PACKET):
        p = data[at : at + TS_PACKET]
        if p[3] & 0x20 and p[4] >= 7 and p[5] & 0x10:
            found.append(p[6] << 25 | p[7] << 17 | p[8] << 9 | p[9] << 1 | p[10] >> 7)
    return found


def test_the_clock_references_move_with_the_timestamps():
    first, second = clip(12.0, Look(width=320)), clip(12.0, Look(width=384))
    restamper = Restamper()
    fed(restamper, first)
    restamper.begin()

    after = fed(restamper, second)

    offset = (stamps(after, "video")[0] - stamps(second, "video")[0]) % WRAP
    assert len(after) == len(second)
    assert [(pcr - offset) % WRAP for pcr in pcrs(after)] == pcrs(second)
    assert len(pcrs(second)) > 100


def test_timestamps_near_the_wrap_go_on_past_it():
    restamper = Restamper()
    restamper._latest = WRAP - 1000  # as after a day and a bit of one time line
    restamper.begin()

    after = fed(restamper, clip(12.0, Look(width=320)))

    video = stamps(after, "video")
    assert all((later - earlier) % WRAP == 3600 for earlier, later in itertools.pairwise(video))
    assert restamper._latest > WRAP
