"""Whether a source's picture still shows a programme: not frozen, not black.

A source can keep sending a good stream (a steady clock, key frames on time) of a picture that
no longer changes: the provider's encoder repeats its last frame when its own input died, or
sends black. The bytes and the clock do not tell; only the picture does. So every
``interval_seconds`` (a quarter less at the least) :class:`PictureWatch` takes the source's next
video key frame (its whole access unit: the PES of the video PID from the random-access point to
the next PES start), decodes it alone with PyAV (the codec named by the PMT's stream type:
H.264, HEVC, MPEG-1/2 or MPEG-4 Part 2) and shrinks it to a small grey thumbnail
(:data:`THUMBNAIL`, swscale's area average), which is compared with the picture the run of like
ones started with:

- **frozen**: the mean absolute difference from that picture stays under
  :data:`FROZEN_DIFFERENCE` (grey levels of 255) for ``frozen_seconds``;
- **black**: at least :data:`BLACK_SHARE` of the thumbnail's pixels are darker than
  :data:`BLACK_LEVEL` (a tenth of full scale, as FFmpeg's ``blackdetect``; a share rather than
  a mean so that a channel's logo on black is black still) for ``black_seconds``.

A black picture is judged by the black check alone: with it off, black is no failure (a
frozen black picture neither). Each check is off at 0, and a source is judged from its first
picture on, never before: the failover loop feeds the watch only what goes out to the viewers.

Decoding is done off the event loop, in a small pool of worker threads
(``decode_pool.py``, shared with the audio check), one decode at most per watch: a key frame
due while the last is still being decoded is skipped, not queued, so a CPU that falls behind
makes the checks less frequent, never a backlog. A key frame that does not decode (damaged, an
unknown codec) is not a picture: it judges nothing. Times are the wall-clock times the key
frames arrived.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import av
import numpy as np

from channels_admin.streaming.decode_pool import decode_pool
from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import (
    H264,
    HEVC,
    ProgramScanner,
    packet_payload,
    pes_elementary,
    pid_rows,
)

logger = logging.getLogger(__name__)

THUMBNAIL = (64, 36)  # width, height: 16:9, enough to see a picture change, cheap to compare
FROZEN_DIFFERENCE = 1.0  # mean absolute difference (of 255) under which two pictures are alike
BLACK_LEVEL = 26  # of 255: darker than a tenth of full scale
BLACK_SHARE = 0.98  # of the thumbnail's pixels
# The next key frame is taken once this share of the interval has passed: key frames as far
# apart as the interval, one arriving a little early (a large key frame paced by the bytes, a
# burst), are then each taken rather than every other one.
DUE_SHARE = 0.75
UNIT_MAX_BYTES = 8 * 1024 * 1024  # a key frame larger than this is not decoded (nor held)
# ISO/IEC 13818-1 stream types the watch decodes, and FFmpeg's decoder of each
DECODERS = {H264: "h264", HEVC: "hevc", 0x01: "mpeg1video", 0x02: "mpeg2video", 0x10: "mpeg4"}


@dataclass(frozen=True)
class PictureChecks:
    """How a source's picture is judged; a check is off at 0 seconds."""

    frozen_seconds: float = 20.0
    black_seconds: float = 10.0
    interval_seconds: float = 1.0  # how often a key frame is decoded

    @property
    def on(self) -> bool:
        return self.frozen_seconds > 0 or self.black_seconds > 0


OFF = PictureChecks(frozen_seconds=0, black_seconds=0)


class PictureWatch:
    """Feed it a source's chunks (whole TS packets, as they go out); :attr:`failed` says why
    its picture failed, once it has."""

    def __init__(
        self, checks: PictureChecks, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._checks = checks
        self._clock = clock
        self._scanner = ProgramScanner()
        self._due = 0.0  # when the next key frame is to be taken
        self._unit: bytearray | None = None  # the key frame being gathered
        self._unit_at = 0.0  # when it arrived
        self._decoding: concurrent.futures.Future[np.ndarray | None] | None = None
        self._decoding_at = 0.0
        self._reference: np.ndarray | None = None  # the first picture of the run of like ones
        self._alike_since = 0.0
        self._black_since: float | None = None
        self.decodes = 0  # key frames handed to the decoder
        self.pictures = 0  # of them, decoded and judged
        self.skipped = 0  # key frames due while a decode was still running
        self.failed: str | None = None

    @property
    def busy(self) -> bool:
        """A key frame is being decoded."""
        return self._decoding is not None and not self._decoding.done()

    @property
    def held_bytes(self) -> int:
        """Of the key frame being gathered."""
        return len(self._unit) if self._unit is not None else 0

    def feed(self, data: bytes) -> None:
        """Take the next key frame from ``data`` when one is due, and judge what was decoded."""
        self._collect()
        if self.failed is not None or not self._checks.on:
            return
        starts = self._scanner.scan(data)
        codec = DECODERS.get(self._scanner.video_type)
        pid = self._scanner.video_pid
        if codec is None or pid is None:
            return
        rows = pid_rows(data, pid)
        if not rows:
            return
        opening = None  # the row where the key frame's PES starts, in this chunk
        if self._unit is None:
            now = self._clock()
            key = next((start.row for start in starts if start.key), None)
            if key is None or (now < self._due and not self._verdict_due(now)):
                return
            if self._decoding is not None:  # not queued: the next key frame is taken instead
                self.skipped += 1
                return
            self._unit, self._unit_at, opening = bytearray(), now, key
            rows = rows[rows.index(key) :]
        for row in rows:
            packet = data[row * TS_PACKET : (row + 1) * TS_PACKET]
            payload = packet_payload(packet)
            if row == opening:
                elementary = pes_elementary(payload)
                if elementary is None:
                    self._unit = None  # no PES header: nothing to decode
                    return
                payload = elementary
            elif packet[1] & 0x40:  # the next PES starts: the key frame is whole
                self._decode(codec, bytes(self._unit))
                return
            self._unit += payload
            if len(self._unit) > UNIT_MAX_BYTES:
                logger.info("picture check: a key frame over %d bytes is left", UNIT_MAX_BYTES)
                self._unit = None
                self._due = self._clock() + self._checks.interval_seconds
                return

    def close(self) -> None:
        """The source ended: a decode not yet started is not started."""
        if self._decoding is not None:
            self._decoding.cancel()
            self._decoding = None
        self._unit = None

    def _verdict_due(self, now: float) -> bool:
        """A run of like (or black) pictures is as long as its check's seconds: the next key
        frame decides at once, not an interval later."""
        checks = self._checks
        frozen = self._reference is not None and checks.frozen_seconds > 0
        black = self._black_since is not None and checks.black_seconds > 0
        return (frozen and now >= self._alike_since + checks.frozen_seconds) or (
            black and now >= self._black_since + checks.black_seconds
        )

    def _decode(self, codec: str, unit: bytes) -> None:
        self._unit = None
        self._due = self._unit_at + DUE_SHARE * self._checks.interval_seconds
        self._decoding = decode_pool().submit(thumbnail, codec, unit)
        self.decodes += 1
        self._decoding_at = self._unit_at

    def _collect(self) -> None:
        """Judge the picture the last decode made, if it is done."""
        decoding = self._decoding
        if decoding is None or not decoding.done():
            return
        self._decoding = None
        try:
            picture = decoding.result()
        except Exception:  # a bug, not a picture: never the source's failure
            logger.exception("picture check: decoding a key frame failed")
            return
        if picture is not None and self.failed is None:
            self._judge(picture, self._decoding_at)

    def _judge(self, picture: np.ndarray, at: float) -> None:
        self.pictures += 1
        checks = self._checks
        if np.count_nonzero(picture < BLACK_LEVEL) >= BLACK_SHARE * picture.size:
            self._reference = None  # black is the black check's: frozen starts afresh after it
            if self._black_since is None:
                self._black_since = at
            if checks.black_seconds and at - self._black_since >= checks.black_seconds:
                self.failed = f"black picture for {checks.black_seconds:g} s"
            return
        self._black_since = None
        if self._reference is None or difference(picture, self._reference) >= FROZEN_DIFFERENCE:
            self._reference, self._alike_since = picture, at
        elif checks.frozen_seconds and at - self._alike_since >= checks.frozen_seconds:
            self.failed = f"frozen picture for {checks.frozen_seconds:g} s"


def difference(one: np.ndarray, other: np.ndarray) -> float:
    """The mean absolute difference of two thumbnails, in grey levels."""
    return float(np.mean(np.abs(one.astype(np.int16) - other.astype(np.int16))))


def thumbnail(codec: str, unit: bytes) -> np.ndarray | None:
    """The picture of the key frame ``unit`` (an access unit of ``codec``, decoded alone) as a
    :data:`THUMBNAIL` of grey levels (full range); None if it does not decode."""
    try:
        context = av.CodecContext.create(codec, "r")
        # One thread: the watch decodes one picture at a time, and FFmpeg's frame threads
        # would hold it back until more came.
        context.thread_count = 1
        frames = [*context.decode(av.Packet(unit)), *context.decode(None)]
    except (av.FFmpegError, ValueError):
        return None
    if not frames:
        return None
    width, height = THUMBNAIL
    grey = frames[0].reformat(width=width, height=height, format="gray", interpolation="AREA")
    return grey.to_ndarray()
