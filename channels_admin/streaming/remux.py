"""Media segments remuxed into one MPEG-TS stream with PyAV, without re-encoding.

An HLS upstream may cut its stream into fragmented MP4 (an ``EXT-X-MAP`` init section, then a
fragment per segment) or into raw audio frames, or carry its audio in a playlist of its own;
the hub relays one MPEG-TS stream. :class:`TsRemuxer` demuxes each segment (with its init
section in front) and muxes the packets of all its tracks into one MPEG-TS muxer kept across
segments, so the output has continuous continuity counters and timestamps. A discontinuity
starts a new muxer (fresh PAT and PMT), as the codecs may change there.
"""

from __future__ import annotations

import io
import logging
import threading

import av

from channels_admin.streaming.ts import TS_PACKET

logger = logging.getLogger(__name__)

# FFmpeg repeats PAT and PMT before every video key frame; the short period also lets a client
# that joins between key frames learn the programme layout at once. flush_packets hands every
# muxed packet over at once instead of when FFmpeg's 32 KiB buffer fills.
MUX_OPTIONS = {"pat_period": "0.1", "sdt_period": "0.5", "flush_packets": "1"}


class RemuxError(Exception):
    pass


class PacketSink:
    """File-like target for a muxer: collects bytes, hands them out in whole TS packets."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def write(self, data: bytes) -> int:
        self._pending += data
        return len(data)

    def take(self) -> bytes:
        cut = len(self._pending) - len(self._pending) % TS_PACKET
        chunk = bytes(self._pending[:cut])
        del self._pending[:cut]
        return chunk


class TsRemuxer:
    """Segments in, MPEG-TS out; one per upstream reader. :meth:`feed` runs in a worker
    thread, so :meth:`close` waits for a feed under way rather than free the muxer under it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sink = PacketSink()
        self._output: av.container.OutputContainer | None = None
        # per (track, input stream index): the output stream, the last dts muxed (input ticks),
        # and the ticks added to inputs that restart their clock at zero
        self._streams: dict[tuple[str, int], av.stream.Stream] = {}
        self._last_dts: dict[tuple[str, int], int] = {}
        self._shift: dict[tuple[str, int], int] = {}

    def feed(self, parts: list[tuple[str, bytes]], *, discontinuity: bool = False) -> bytes:
        """The TS bytes of one stretch of media: (track, segment with its init section in
        front) for each part, e.g. a video segment and the audio segments of its time."""
        with self._lock:
            return self._feed(parts, discontinuity)

    def close(self) -> None:
        with self._lock:
            self._close()

    def _feed(self, parts: list[tuple[str, bytes]], discontinuity: bool) -> bytes:
        if discontinuity:
            self._close()
        try:
            sources = [(track, _opened(data)) for track, data in parts]
            try:
                if self._output is None:
                    self._open(sources)
                for track, source in sources:
                    for packet in source.demux(_media_streams(source)):
                        self._mux(track, packet)
            finally:
                for _, source in sources:
                    source.close()
        except av.FFmpegError as error:
            # FFmpeg's words stay in the cause, for the log (failure_reasons.py)
            raise RemuxError("the segment could not be remuxed") from error
        return self._sink.take()

    def _close(self) -> None:
        if self._output is not None:
            try:
                self._output.close()
            except av.FFmpegError:
                logger.debug("remux: closing the muxer failed", exc_info=True)
        self._output = None
        self._streams.clear()
        self._last_dts.clear()
        self._shift.clear()
        self._sink.take()

    def _open(self, sources: list[tuple[str, av.container.InputContainer]]) -> None:
        if not any(_media_streams(source) for _, source in sources):
            raise RemuxError("the segment holds neither video nor audio")
        self._output = av.open(self._sink, "w", format="mpegts", container_options=MUX_OPTIONS)
        for track, source in sources:
            for stream in _media_streams(source):
                if (track, stream.index) not in self._streams:
                    template = self._output.add_stream_from_template(stream)
                    self._streams[(track, stream.index)] = template

    def _mux(self, track: str, packet: av.Packet) -> None:
        key = (track, packet.stream.index)
        target = self._streams.get(key)
        if target is None or packet.dts is None or packet.size == 0:
            return  # a stream that appeared after the first segment; the PMT has no place for it
        # Packed audio restarts its clock at zero in every segment; carry it on instead.
        shift = self._shift.get(key, 0)
        last = self._last_dts.get(key)
        if last is not None and packet.dts + shift <= last:
            shift = last + (packet.duration or 1) - packet.dts
            self._shift[key] = shift
        if shift:
            packet.dts += shift
            if packet.pts is not None:
                packet.pts += shift
        self._last_dts[key] = packet.dts
        packet.stream = target
        self._output.mux(packet)


def _media_streams(source: av.container.InputContainer) -> list[av.stream.Stream]:
    return [stream for stream in source.streams if stream.type in ("video", "audio")]


def _opened(data: bytes) -> av.container.InputContainer:
    # MPEG-TS is named rather than probed: the probe gives up on a short segment.
    return av.open(io.BytesIO(data), "r", format="mpegts" if data[:1] == b"\x47" else None)
