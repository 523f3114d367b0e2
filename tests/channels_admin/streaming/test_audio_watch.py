"""The silent-audio check on its own: real encoded sound in MPEG-TS (the demo encoder's beep and
its silent variant; MPEG audio, AC-3 and E-AC-3 encoded here), fed a chunk at a time on a clock
of the stream's own time, so that which run failed a source, and when, is exact. Each run's
decode is waited for before the next chunk, as a chunk a frame long would be on the wire."""

from __future__ import annotations

import functools
import itertools
import math
import time

import av
import numpy as np
import pytest

from channels_admin.streaming.audio_watch import (
    SAMPLE_MAX_BYTES,
    SILENT_LEVEL,
    AudioChecks,
    AudioWatch,
    sample_level,
)
from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks
from channels_admin.streaming.remux import MUX_OPTIONS, PacketSink
from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import ProgramScanner, pid_rows

FPS = 25
OPTIONS = PatternOptions(width=320, height=180, fps=FPS, video_bitrate=400_000)
RATE = 48_000


@functools.cache
def frames(sound: str = "beep", seconds: float = 8.0, audio: bool = True) -> tuple[bytes, ...]:
    """The demo stream, one chunk per encoded frame (the muxer's first may hold the layout)."""
    options = PatternOptions(**{**OPTIONS.__dict__, "sound": sound, "audio": audio})
    return tuple(pattern_chunks(options, realtime=False, max_seconds=seconds))


class Run:
    """A watch fed chunks, the clock at chunk N being N times ``step`` seconds."""

    def __init__(self, checks: AudioChecks, step: float = 1 / FPS) -> None:
        self.now = 0.0
        self.step = step
        self.watch = AudioWatch(checks, clock=lambda: self.now)
        self.failed_at: float | None = None

    def feed(self, chunks: tuple[bytes, ...]) -> Run:
        for index, chunk in enumerate(chunks):
            self.now = index * self.step
            self.watch.feed(chunk)
            settled(self.watch)
            if self.watch.failed is not None:
                self.failed_at = self.now
                break
        return self


def settled(watch: AudioWatch, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while watch.busy:
        assert time.monotonic() < deadline, "a decode did not end"
        time.sleep(0.001)


def test_a_beep_a_second_is_never_silent_for_the_seconds():
    # the pauses between beeps are digital silence 0.9 s long: a run in one (every 1.5 s the
    # watch decodes one, of 0.32 s: the runs at 1.28, 3.20 and 5.12 s fall in a pause) is
    # followed by every next run until a beep, within a second
    run = Run(AudioChecks(silent_seconds=2, interval_seconds=1.5)).feed(frames("beep"))

    assert run.watch.failed is None
    # 5 runs once an interval (at 0, 1.28, 3.20, 5.12 and 7.04 s), and the 2 that followed
    # each silent one, the second of them with the beep
    assert (run.watch.decodes, run.watch.samples, run.watch.skipped) == (11, 11, 0)


def test_silent_sound_fails_once_heard_back_to_back_for_the_seconds():
    run = Run(AudioChecks(silent_seconds=3, interval_seconds=1)).feed(frames("silent"))

    assert run.watch.failed == "silent audio for 3 s"
    # runs of 0.32 s (15 AAC frames) from 0 s on, each silent and decoded: the tenth ends at
    # 3.2 s, and is judged at the next chunk
    assert (run.watch.samples, run.watch.level) == (10, -math.inf)
    assert run.failed_at == pytest.approx(3.24)


def test_sound_that_goes_silent_counts_from_the_first_silent_run():
    # given 2 s of beeps, then silence
    chunks = frames("beep")[:50] + frames("silent")[50:]
    run = Run(AudioChecks(silent_seconds=2, interval_seconds=1))

    run.feed(chunks)

    # the last beep sounds from 1.0 to 1.1 s (in the run decoded at 0.96 s); the chain starts
    # with the next run decoded, at 1.92 s in the pause after it, and its run ending at 4.16 s
    # (judged at the next chunk) makes 2 s
    assert run.watch.failed == "silent audio for 2 s"
    assert run.failed_at == pytest.approx(4.2)


def test_off_at_zero_decodes_nothing():
    run = Run(AudioChecks(silent_seconds=0)).feed(frames("silent"))

    assert (run.watch.failed, run.watch.decodes) == (None, 0)


def test_a_source_without_sound_is_never_judged_silent():
    run = Run(AudioChecks(silent_seconds=1, interval_seconds=1)).feed(frames(audio=False))

    assert (run.watch.failed, run.watch.decodes) == (None, 0)


def without_pid(chunks: tuple[bytes, ...], pid: int) -> tuple[bytes, ...]:
    """``chunks`` with every packet of ``pid`` taken out (a chunk left empty kept empty)."""
    return tuple(
        b"".join(
            packet
            for packet in (chunk[at : at + TS_PACKET] for at in range(0, len(chunk), TS_PACKET))
            if ((packet[1] & 0x1F) << 8 | packet[2]) != pid
        )
        for chunk in chunks
    )


def audio_pid(chunks: tuple[bytes, ...]) -> int:
    scanner = ProgramScanner()
    for chunk in chunks:
        scanner.scan(chunk)
    assert scanner.audio_pid is not None
    return scanner.audio_pid


def test_an_audio_stream_that_stops_coming_fails_the_source_as_no_audio():
    # given the beeping pattern whose sound stops reaching the stream after 2 s, the PMT still
    # listing it and the picture going on
    chunks = frames("beep")
    pid = audio_pid(chunks)
    chunks = chunks[:50] + without_pid(chunks[50:], pid)
    run = Run(AudioChecks(silent_seconds=2, interval_seconds=1))

    # when the watch is fed it
    run.feed(chunks)

    # then the source fails 2 s after the sound's last packet (its last beep was heard)
    assert run.watch.failed == "no audio for 2 s"
    last_sound = max(index for index, chunk in enumerate(chunks) if pid_rows(chunk, pid))
    assert run.failed_at == pytest.approx(last_sound / FPS + 2, abs=1 / FPS)
    assert run.watch.level is not None
    assert run.watch.level > SILENT_LEVEL  # what came was heard


def test_an_audio_stream_listed_and_never_sent_fails_after_the_seconds():
    chunks = frames("beep")
    run = Run(AudioChecks(silent_seconds=1, interval_seconds=1))

    run.feed(without_pid(chunks, audio_pid(chunks)))

    assert (run.watch.failed, run.watch.decodes) == ("no audio for 1 s", 0)
    assert run.failed_at == pytest.approx(1.0, abs=1 / FPS)


def test_a_sound_the_pmt_stops_listing_is_not_missed_and_counts_afresh_when_listed_again():
    # given 2 s with sound, 3 s whose PMT lists none (a programme without sound), then sound
    # listed again: its first chunks come before its first packet
    chunks = frames("beep")[:50] + frames(audio=False)[50:125] + frames("beep")[125:]
    run = Run(AudioChecks(silent_seconds=2, interval_seconds=1))

    run.feed(chunks)

    # then neither the gap nor the pauses around it were taken for no audio, or for silence
    # (before, the chain of silence that began in the pause before the gap went on after it)
    assert run.watch.failed is None


def test_the_muxers_gaps_between_sound_packets_are_not_taken_for_no_audio():
    # the muxer sends the sound in bursts: the longest gap between them is well under a second
    chunks = frames("beep")
    pid = audio_pid(chunks)
    heard = [index for index, chunk in enumerate(chunks) if pid_rows(chunk, pid)]
    longest_gap = max(later - earlier for earlier, later in itertools.pairwise(heard))

    run = Run(AudioChecks(silent_seconds=1, interval_seconds=1)).feed(chunks)

    assert longest_gap / FPS < 1
    assert run.watch.failed is None


def audio_stream(
    codec: str, amplitude: float, seconds: float = 4.0, *, dvb: bool = False
) -> tuple[bytes, ...]:
    """Audio alone in MPEG-TS, stereo 48 kHz, ``codec`` encoding a 440 Hz sine of
    ``amplitude`` (0: digital silence); one chunk per encoded frame. ``dvb``: laid out as DVB
    does (FFmpeg's ``system_b``: AC-3 and E-AC-3 as private data, told by a descriptor)."""
    sink = PacketSink()
    options = {**MUX_OPTIONS, **({"mpegts_flags": "system_b"} if dvb else {})}
    container = av.open(sink, "w", format="mpegts", container_options=options)
    stream = container.add_stream(codec, rate=RATE, layout="stereo")
    size = stream.codec_context.frame_size or 1152
    kind = stream.codec_context.format
    chunks, sent = [], 0
    while sent < seconds * RATE:
        wave = amplitude * np.sin(2 * np.pi * 440 * np.arange(sent, sent + size) / RATE)
        planes = np.stack([wave, wave])
        if kind.name.startswith("s32"):
            planes = (planes * 2**31 - 1).astype(np.int32)
        elif kind.name.startswith("s16"):
            planes = (planes * 32767).astype(np.int16)
        else:
            planes = planes.astype(np.float32)
        if not kind.is_planar:
            planes = planes.T.reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(planes, format=kind.name, layout="stereo")
        frame.sample_rate, frame.pts = RATE, sent
        container.mux(stream.encode(frame))
        chunks.append(sink.take())
        sent += size
    container.mux(stream.encode(None))
    container.close()
    chunks.append(sink.take())
    return tuple(chunk for chunk in chunks if chunk)


CODECS = {"aac": 1024, "mp2": 1152, "libmp3lame": 1152, "ac3": 1536, "eac3": 1536}


@pytest.mark.parametrize("codec", CODECS)
def test_each_codec_is_heard_at_its_level_and_silence_as_silence(codec):
    # a -20 dBFS peak: an RMS of -23 dBFS, a sine's 3 dB under its peak
    frame_seconds = CODECS[codec] / RATE
    sound = Run(AudioChecks(silent_seconds=1, interval_seconds=1), step=frame_seconds)
    silence = Run(AudioChecks(silent_seconds=1, interval_seconds=1), step=frame_seconds)

    sound.feed(audio_stream(codec, 0.1))
    silence.feed(audio_stream(codec, 0.0))

    assert (sound.watch.failed, sound.watch.samples >= 3) == (None, True)
    # within 1.5 dB: a run decoded alone loses its first frame's overlap (and MP3 a frame or
    # two to its bit reservoir), some silence in 0.3 s
    assert sound.watch.level == pytest.approx(-23.0, abs=1.5)
    assert silence.watch.failed == "silent audio for 1 s"
    assert silence.watch.level < -110  # AC-3's silence is not quite digital zero


@pytest.mark.parametrize(("codec", "descriptor"), [("ac3", 0x6A), ("eac3", 0x7A)])
def test_dvb_ac3_and_eac3_as_private_data_are_heard_and_silence_as_silence(codec, descriptor):
    # given DVB's layout: the PMT lists the sound as private data, with the codec's descriptor
    sound_chunks = audio_stream(codec, 0.1, dvb=True)
    pmt = next(
        packet
        for chunk in sound_chunks
        for packet in (chunk[at : at + TS_PACKET] for at in range(0, len(chunk), TS_PACKET))
        if packet[1] & 0x40 and packet[5] == 0x02  # a PMT section starts in the packet
    )
    assert (pmt[15] & 0x0F, pmt[16]) == (0, 0)  # no programme descriptors: a stream at 17
    assert pmt[17] == 0x06  # its type: private data
    described, tags, at = pmt[22 : 22 + pmt[21]], [], 0
    while at < len(described):  # its descriptors: tag, length, content
        tags.append(described[at])
        at += 2 + described[at + 1]
    assert tags == [0x05, descriptor]  # the registration ("AC-3", "EAC3"), then the codec's
    frame_seconds = CODECS[codec] / RATE
    sound = Run(AudioChecks(silent_seconds=1, interval_seconds=1), step=frame_seconds)
    silence = Run(AudioChecks(silent_seconds=1, interval_seconds=1), step=frame_seconds)

    # when the watch is fed the sound, and silence
    sound.feed(sound_chunks)
    silence.feed(audio_stream(codec, 0.0, dvb=True))

    # then each is judged as the same codec under its own stream type is
    assert (sound.watch.failed, sound.watch.samples >= 3) == (None, True)
    assert sound.watch.level == pytest.approx(-23.0, abs=1.5)
    assert silence.watch.failed == "silent audio for 1 s"


def test_the_silent_level_lies_between_a_dead_input_hiss_and_a_quiet_passage():
    # given AAC of a -50 dBFS tone (quiet, but a programme) and of -75 dBFS noise (hiss)
    rng = np.random.default_rng(5)

    def level_of(wave: np.ndarray) -> float | None:
        sink = PacketSink()
        container = av.open(sink, "w", format="adts")
        stream = container.add_stream("aac", rate=RATE, layout="mono")
        for at in range(0, len(wave) - 1024, 1024):
            frame = av.AudioFrame.from_ndarray(
                wave[np.newaxis, at : at + 1024].astype(np.float32), format="fltp", layout="mono"
            )
            frame.sample_rate, frame.pts = RATE, at
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
        container.close()
        return sample_level(0x0F, sink.take())

    t = np.arange(RATE // 2) / RATE
    quiet = level_of(10 ** (-47 / 20) * np.sin(2 * np.pi * 440 * t))
    hiss = level_of(10 ** (-75 / 20) * rng.standard_normal(RATE // 2))

    assert quiet == pytest.approx(-50.0, abs=1.0)
    assert hiss == pytest.approx(-75.0, abs=1.5)
    assert hiss < SILENT_LEVEL < quiet


def layout_and_audio_start() -> tuple[bytes, bytes]:
    """The encoder's PAT and PMT, and the first packet of its first audio PES."""
    first = b"".join(frames("beep")[:3])
    packets = [first[at : at + TS_PACKET] for at in range(0, len(first), TS_PACKET)]
    layout = b"".join(p for p in packets if (p[1] & 0x1F) << 8 | p[2] in (0, 0x1000))
    audio = next(p for p in packets if (p[1] & 0x1F) << 8 | p[2] == 0x101 and p[1] & 0x40)
    return layout, audio


def audio_packets(payload: bytes) -> bytes:
    """``payload`` in packets of the encoder's audio PID (0x101), none starting a PES."""
    out = bytearray()
    for at in range(0, len(payload), TS_PACKET - 4):
        out += bytes([0x47, 0x01, 0x01, 0x10]) + payload[at : at + TS_PACKET - 4].ljust(
            184, b"\xff"
        )
    return bytes(out)


def test_a_run_that_never_ends_is_held_up_to_the_cap_and_judges_nothing():
    # given an audio PES that never ends: 1 MiB of noise after its start
    layout, start = layout_and_audio_start()
    noise = np.random.default_rng(7).integers(0, 256, 1024 * 1024, dtype=np.uint8).tobytes()
    run = Run(AudioChecks(silent_seconds=1, interval_seconds=1))
    run.watch.feed(layout + start)

    held = []
    for at in range(0, len(noise), 64 * 1024):
        run.watch.feed(audio_packets(noise[at : at + 64 * 1024]))
        held.append(run.watch.held_bytes)
        settled(run.watch)
    run.watch.feed(b"")

    assert max(held) < SAMPLE_MAX_BYTES
    # handed over at the cap, noise decodes to nothing; the next run is not due for a while
    assert (run.watch.decodes, run.watch.samples, run.watch.failed) == (1, 0, None)


def test_a_burst_of_chunks_breaks_no_chain_of_silence():
    # given the silent stream in bursts of a second each: the runs in a burst are whole one
    # after the other, faster than the decoder ends the last
    chunks = frames("silent")
    bursts = tuple(b"".join(chunks[at : at + FPS]) for at in range(0, len(chunks), FPS))
    run = Run(AudioChecks(silent_seconds=3, interval_seconds=1), step=1.0)

    run.feed(bursts)

    # every run followed the last: none was left, and the chain failed the source once the
    # bursts' clock said 3 s (the run that ends it judged a burst or two later)
    assert (run.watch.failed, run.watch.skipped) == ("silent audio for 3 s", 0)
    assert run.failed_at in (3.0, 4.0, 5.0)
