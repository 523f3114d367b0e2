"""Whether a source's sound still plays: not silent for ``silent_seconds`` (off by default).

A source can keep sending a good stream whose sound has died: the provider's encoder lost its
audio input and encodes silence. The picture checks (``picture_watch.py``) do not hear it. So
:class:`AudioWatch` cuts the source's first audio stream (the PMT's first audio PID) into runs
back to back: from one PES start to the first whose time stamp is :data:`SAMPLE_SECONDS` on
(at most :data:`SAMPLE_MAX_BYTES`; gathering a run copies its bytes, a few kB a second, and
nothing more). Every ``interval_seconds`` (a quarter less at the least) a run is decoded with
PyAV (FFmpeg's parser cuts it into frames; the codec named by the PMT's stream type: AAC in
ADTS or LATM, MPEG-1/2 audio of any layer, AC-3, E-AC-3) and its level measured: the RMS of
every sample of every channel, in dB below full scale (dBFS). A run below
:data:`SILENT_LEVEL` is silent.

Once a run is silent every run is decoded, each the one after the last, until one is not: a
chain of silent runs that follow each other lasts from the first one's start to the last one's
end, and fails the source at ``silent_seconds``. So "silent audio for 30 s" means 30 s of the
stream's sound, all of it decoded, below the level: a programme's pauses between sounds never
add up to a failure (the demo pattern's beep sounds 0.1 s a second, and its source is never
judged silent). One decode at most runs per watch (in the shared pool of ``decode_pool.py``,
off the event loop): while it does, the run being gathered grows past its length rather than
end, so a burst of chunks or a loaded CPU loses nothing of the chain. A run that reaches the
byte cap while the decoder is still busy is left, and breaks the chain: what was not heard is
never counted as silence, so a CPU that falls behind delays the verdict, never makes one up.

An audio stream the PMT lists that sends no packet for ``silent_seconds`` while the rest of
the stream comes (a muxer that lost its sound input altogether) fails the source too, "no
audio for 30 s", whatever its codec. A source with no audio stream is never judged, one of a
codec not decoded here is never judged silent, and a run that does not decode judges nothing
(and breaks the chain). Times are the wall-clock times the PES arrived, as the picture
checks'. The check is off by default
(``CHANNELS_SILENT_SEC`` 0): a quiet programme is not a failure, so when it is on its seconds
must be long (30 s or more).
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import av
import numpy as np

from channels_admin.streaming.decode_pool import decode_pool
from channels_admin.streaming.picture_watch import DUE_SHARE
from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import (
    PTS_HZ,
    PTS_WRAP,
    ProgramScanner,
    packet_payload,
    pes_elementary,
    pes_pts,
    pid_rows,
)

logger = logging.getLogger(__name__)

SAMPLE_SECONDS = 0.3  # of the stream's time: a few dozen frames, cheap to decode
# What one run may hold: 0.3 s of E-AC-3 at its highest rates is far less. A run that reaches
# it is decoded as it is, and the next starts afresh.
SAMPLE_MAX_BYTES = 256 * 1024
SAMPLE_MAX_PES = 32  # a run without time stamps ends after this many PES
# dBFS (a full-scale square wave is 0): 37 dB under the loudness programmes are normalised to
# (-23 LUFS, EBU R 128; -24 LKFS, ATSC A/85), a level that only a dead feed stays under for
# long: digital silence (an encoder whose input died encodes zeros) or the hiss of an input
# that nothing drives (-70 dBFS and below on 16-bit gear).
SILENT_LEVEL = -60.0
# ISO/IEC 13818-1 stream types the watch decodes, and FFmpeg's decoder of each
DECODERS = {0x0F: "aac", 0x11: "aac_latm", 0x81: "ac3", 0x87: "eac3"}
# MPEG-1/2 audio (0x03, 0x04): FFmpeg has a decoder per layer, and its parser will not feed
# another layer's, so the layer is read from the first frame header.
MPEG_AUDIO = frozenset({0x03, 0x04})
MPEG_AUDIO_DECODERS = {3: "mp1float", 2: "mp2float", 1: "mp3float"}  # by the header's layer bits


@dataclass(frozen=True)
class AudioChecks:
    """How a source's sound is judged; off at 0 seconds."""

    silent_seconds: float = 0.0
    interval_seconds: float = 1.0  # how often a run is decoded while there is sound

    @property
    def on(self) -> bool:
        return self.silent_seconds > 0


AUDIO_OFF = AudioChecks()


@dataclass
class _Run:
    """A run of the audio PID's elementary stream being gathered, or decoded."""

    at: float  # when its first PES arrived
    pts: int | None  # its first PES's time stamp
    follows: bool  # it starts where the run before it, handed to the decoder, ended
    data: bytearray
    pes: int = 1
    end: float = 0.0  # when it was whole


class AudioWatch:
    """Feed it a source's chunks (whole TS packets, as they go out); :attr:`failed` says why
    its sound failed, once it has."""

    def __init__(self, checks: AudioChecks, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._checks = checks
        self._clock = clock
        self._scanner = ProgramScanner()
        self._due = 0.0  # a run from this time on is decoded, while there is sound
        self._run: _Run | None = None  # being gathered
        self._decoding: concurrent.futures.Future[float | None] | None = None
        self._decoding_run: _Run | None = None
        self._silent_since: float | None = None  # the chain of silent runs began
        self._heard: tuple[int, float] | None = None  # the audio PID, and its last packet's time
        self.decodes = 0  # runs handed to the decoder
        self.samples = 0  # of them, decoded and judged
        self.skipped = 0  # runs left because the last was still being decoded
        self.level: float | None = None  # of the last run judged, in dBFS
        self.failed: str | None = None

    @property
    def busy(self) -> bool:
        """A run is being decoded."""
        return self._decoding is not None and not self._decoding.done()

    @property
    def held_bytes(self) -> int:
        """Of the run being gathered."""
        return len(self._run.data) if self._run is not None else 0

    def feed(self, data: bytes) -> None:
        """Gather and decode a run of the sound when one is due, and judge what was decoded."""
        self._collect()
        if self.failed is not None or not self._checks.on:
            return
        self._scanner.scan(data)
        pid, stream_type = self._scanner.audio_pid, self._scanner.audio_type
        if pid is None:  # no sound listed (now): none is missed, and no chain goes on
            self._heard = self._run = self._silent_since = None
            return
        rows = pid_rows(data, pid)
        if self._absent(pid, bool(rows)):
            return
        if stream_type not in DECODERS and stream_type not in MPEG_AUDIO:
            return
        for row in rows:
            packet = data[row * TS_PACKET : (row + 1) * TS_PACKET]
            payload = packet_payload(packet)
            if packet[1] & 0x40:  # a PES starts
                payload = self._pes_starts(packet, payload, stream_type)
                if self.failed is not None:
                    return
            if self._run is None or payload is None:
                continue
            self._run.data += payload
            if len(self._run.data) >= SAMPLE_MAX_BYTES:
                self._whole(self._run, stream_type)

    def _absent(self, pid: int, present: bool) -> bool:
        """Whether the PMT's audio PID has sent nothing for the silent seconds while the rest
        of the stream came (a muxer that lost its sound): the source failed then."""
        now = self._clock()
        if present or self._heard is None or self._heard[0] != pid:
            self._heard = (pid, now)  # heard now, or listened for from now on
            return False
        seconds = self._checks.silent_seconds
        if now - self._heard[1] < seconds:
            return False
        self.failed = f"no audio for {seconds:g} s"
        return True

    def close(self) -> None:
        """The source ended: a decode not yet started is not started."""
        if self._decoding is not None:
            self._decoding.cancel()
            self._decoding = None
        self._run = None

    def _pes_starts(self, packet: bytes, payload: bytes, stream_type: int) -> bytes | None:
        """End the run being gathered where it is long enough, and start the next there; what
        of ``payload`` the run takes (None: nothing)."""
        pts = pes_pts(packet)
        follows = False
        run = self._run
        if run is not None:
            if run.pts is not None and pts is not None:
                whole = (pts - run.pts) % PTS_WRAP >= SAMPLE_SECONDS * PTS_HZ
            else:
                whole = run.pes >= SAMPLE_MAX_PES
            if whole:
                self._collect()
                if self.failed is not None:
                    return None
                wanted = self._silent_since is not None or run.at >= self._due
                # The decoder is busy (a burst of chunks, a loaded CPU): the run grows until it
                # is not, so that the chain of silence loses nothing in between.
                whole = not (wanted and self._decoding is not None)
            if not whole:
                run.pes += 1
                elementary = pes_elementary(payload)
                if elementary is None:
                    self._run = None  # no PES header: not a run to decode
                return elementary
            follows = self._whole(run, stream_type)
            if self.failed is not None:
                return None
        elementary = pes_elementary(payload)
        if elementary is None:
            return None
        self._run = _Run(at=self._clock(), pts=pts, follows=follows, data=bytearray())
        return elementary

    def _whole(self, run: _Run, stream_type: int) -> bool:
        """``run`` is gathered: hand it to the decoder if it is wanted, and say whether it was.
        It is wanted while the sound is silent, otherwise once an interval; one decode at
        most: a run at the byte cap while the last is still being decoded is left."""
        self._run = None
        run.end = self._clock()
        self._collect()
        if self.failed is not None:
            return False
        if self._silent_since is None and run.at < self._due:
            return False
        if self._decoding is not None:
            self.skipped += 1
            return False
        self._due = run.at + DUE_SHARE * self._checks.interval_seconds
        self._decoding = decode_pool().submit(sample_level, stream_type, bytes(run.data))
        self._decoding_run = run
        self.decodes += 1
        return True

    def _collect(self) -> None:
        """Judge the run the last decode measured, if it is done."""
        decoding, run = self._decoding, self._decoding_run
        if decoding is None or run is None or not decoding.done():
            return
        self._decoding = self._decoding_run = None
        try:
            level = decoding.result()
        except Exception:  # a bug, not silence: never the source's failure
            logger.exception("audio check: decoding a run of the sound failed")
            level = None
        if self.failed is None:
            self._judge(level, run)

    def _judge(self, level: float | None, run: _Run) -> None:
        if level is None:  # not heard: the chain of silence ends
            self._silent_since = None
            return
        self.samples += 1
        self.level = level
        if level >= SILENT_LEVEL:
            self._silent_since = None
            return
        if self._silent_since is None or not run.follows:
            self._silent_since = run.at
        seconds = self._checks.silent_seconds
        if run.end - self._silent_since >= seconds:
            self.failed = f"silent audio for {seconds:g} s"


def sample_level(stream_type: int, data: bytes) -> float | None:
    """The level of ``data`` (a run of the elementary stream of ``stream_type``), decoded
    alone: the RMS of every sample of every channel in dBFS (-inf for digital silence); None
    if nothing of it decodes."""
    codec = DECODERS.get(stream_type) or (
        _mpeg_audio_decoder(data) if stream_type in MPEG_AUDIO else None
    )
    if codec is None:
        return None
    try:
        context = av.CodecContext.create(codec, "r")
        packets = [*context.parse(data), *context.parse(None)]
    except (av.FFmpegError, ValueError):
        return None
    energy, count = 0.0, 0
    for packet in packets:
        try:
            frames = context.decode(packet)
        except (av.FFmpegError, ValueError):
            continue  # a damaged frame: the others still count
        for frame in frames:
            samples = _full_scale(frame.to_ndarray())
            energy += float(np.dot(samples.ravel(), samples.ravel()))
            count += samples.size
    if count == 0:
        return None
    mean = energy / count
    return 10 * math.log10(mean) if mean > 0 else -math.inf


def _full_scale(samples: np.ndarray) -> np.ndarray:
    """Decoded samples as float64, full scale at 1.0."""
    if samples.dtype.kind == "f":
        return samples.astype(np.float64)
    if samples.dtype == np.uint8:
        return (samples.astype(np.float64) - 128) / 128
    return samples.astype(np.float64) / -float(np.iinfo(samples.dtype).min)


def _mpeg_audio_decoder(data: bytes) -> str | None:
    """FFmpeg's decoder for the layer of the first MPEG audio frame header in ``data``."""
    at = data.find(b"\xff")
    while at != -1 and at + 1 < len(data):
        layer = data[at + 1] >> 1 & 0x3
        if data[at + 1] & 0xE0 == 0xE0 and layer:
            return MPEG_AUDIO_DECODERS[layer]
        at = data.find(b"\xff", at + 1)
    return None
