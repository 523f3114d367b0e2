"""Media segments that are not MPEG-TS (fMP4/CMAF, packed audio) remuxed into one MPEG-TS
stream with PyAV, without re-encoding.

An HLS upstream may cut its stream into fragmented MP4 (an ``EXT-X-MAP`` init section, then a
fragment per segment) or into raw audio frames; the hub relays MPEG-TS only. :class:`TsRemuxer`
demuxes each segment (with its init section in front) and muxes the packets into one MPEG-TS
muxer kept across segments, so the output has continuous continuity counters and timestamps.
A discontinuity starts a new muxer (fresh PAT and PMT), as the codecs may change there.
"""

from __future__ import annotations

import io
import logging

import av

logger = logging.getLogger(__name__)

TS_PACKET = 188
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
    """Segments in, MPEG-TS out. Not thread-safe; one per upstream reader."""

    def __init__(self) -> None:
        self._sink = PacketSink()
        self._output: av.container.OutputContainer | None = None
        self._streams: dict[int, av.stream.Stream] = {}  # input index -> output stream
        self._last_dts: dict[int, int] = {}  # input index -> last dts muxed (input ticks)
        self._shift: dict[int, int] = {}  # input index -> ticks added to restart-at-zero inputs

    def feed(self, init: bytes, segment: bytes, *, discontinuity: bool = False) -> bytes:
        """The TS bytes of ``segment`` (with ``init``, its init section, in front)."""
        if discontinuity:
            self.close()
        try:
            with av.open(io.BytesIO(init + segment), "r") as source:
                streams = [s for s in source.streams if s.type in ("video", "audio")]
                if not streams:
                    raise RemuxError("the segment holds neither video nor audio")
                if self._output is None:
                    self._open(streams)
                for packet in source.demux(streams):
                    self._mux(packet)
        except av.FFmpegError as error:
            raise RemuxError(f"the segment could not be remuxed: {error}") from error
        return self._sink.take()

    def close(self) -> None:
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

    def _open(self, streams: list[av.stream.Stream]) -> None:
        self._output = av.open(self._sink, "w", format="mpegts", container_options=MUX_OPTIONS)
        for stream in streams:
            self._streams[stream.index] = self._output.add_stream_from_template(stream)

    def _mux(self, packet: av.Packet) -> None:
        target = self._streams.get(packet.stream.index)
        if target is None or packet.dts is None or packet.size == 0:
            return  # a stream that appeared after the first segment; the PMT has no place for it
        # Packed audio restarts its clock at zero in every segment; carry it on instead.
        shift = self._shift.get(packet.stream.index, 0)
        last = self._last_dts.get(packet.stream.index)
        if last is not None and packet.dts + shift <= last:
            frame = packet.duration or 1
            shift = last + frame - packet.dts
            self._shift[packet.stream.index] = shift
        if shift:
            packet.dts += shift
            if packet.pts is not None:
                packet.pts += shift
        self._last_dts[packet.stream.index] = packet.dts
        packet.stream = target
        self._output.mux(packet)
