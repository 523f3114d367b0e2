"""A TS upstream of a sample file at a fixed bitrate, as one endless stream and as a live HLS
playlist of the same bytes, for the fan-out, relay and HLS benchmarks.

    python -m loopback_fakes.sample_upstream PORT_FILE [--bitrate 4000000] [--write-size 65536]
        [--segment-seconds 1]

Loops the Big Buck Bunny sample from ../shared when present, else synthetic packets.

- ``/live.ts``: the stream, ``--write-size`` bytes at a time, paced to the bitrate.
- ``/live.m3u8``: a live playlist of the last ``WINDOW`` segments of the same endless stream cut
  every ``--segment-seconds`` (``/segment{n}.ts``, each the bitrate's worth of bytes), published
  on the clock as a live encoder publishes them; answered with keep-alive, as HLS origins do.

Run as a process, it writes its port to PORT_FILE and prints each connection it accepts.
"""

from __future__ import annotations

import argparse
import http.server
import itertools
import math
import socket
import threading
import time
from pathlib import Path

from loopback_fakes.ts_stream import Chunks, TsStream

SAMPLE = Path(__file__).resolve().parents[2] / "shared/data/media/bbb_h264_aac_320x180_6s.ts"
PACKET = 188
WINDOW = 6


def stream_bytes() -> bytes:
    if SAMPLE.exists():
        return SAMPLE.read_bytes()
    return b"".join(b"\x47\x01\x00\x10" + bytes([n % 256]) * (PACKET - 4) for n in range(2000))


class Segments:
    """The endless stream cut into live HLS segments that appear on the clock."""

    def __init__(self, source: bytes, bitrate: int, seconds: float) -> None:
        self._source = source
        self._size = round(bitrate / 8 * seconds / PACKET) * PACKET
        self._seconds = seconds
        self._started = time.monotonic()

    def published(self) -> int:
        """How many segments are complete by now."""
        return int((time.monotonic() - self._started) / self._seconds)

    def published_at(self, number: int) -> float:
        """When segment ``number`` appears in the playlist (monotonic seconds)."""
        return self._started + (number + 1) * self._seconds

    def playlist(self) -> bytes:
        end = self.published()
        first = max(0, end - WINDOW)
        lines = [
            "#EXTM3U",
            "#EXT-X-VERSION:3",
            f"#EXT-X-TARGETDURATION:{math.ceil(self._seconds)}",
            f"#EXT-X-MEDIA-SEQUENCE:{first}",
        ]
        for number in range(first, end):
            lines += [f"#EXTINF:{self._seconds:.3f},", f"segment{number}.ts"]
        return ("\n".join(lines) + "\n").encode()

    def segment(self, number: int) -> bytes:
        """The stream's next ``size`` bytes, the last packet a null packet (PID 0x1FFF, which
        players skip) naming the segment, so that a viewer can tell where each one ends."""
        start = number * self._size % len(self._source)
        repeats = -(-(start + self._size) // len(self._source))
        media = (self._source * repeats)[start : start + self._size - PACKET]
        return media + b"\x47\x1f\xff\x10" + f"segment {number}".encode().ljust(PACKET - 4, b"\xff")


class SampleUpstream(TsStream):
    keep_alive = True

    def __init__(
        self,
        *,
        bitrate: int = 4_000_000,
        write_size: int = 65536,
        segment_seconds: float = 1.0,
        log_connections: bool = False,
    ) -> None:
        source = stream_bytes()
        self.bitrate = bitrate
        write_size -= write_size % PACKET
        self._writes = [source[i : i + write_size] for i in range(0, len(source), write_size)]
        self.segments = Segments(source, bitrate, segment_seconds)
        self._log_connections = log_connections
        self._counted: set[socket.socket] = set()
        super().__init__()

    def _answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        with self._lock:
            first = handler.connection not in self._counted
            self._counted.add(handler.connection)
            count = len(self._counted)
        if self._log_connections and first:
            print(f"upstream connection {count} {handler.path}", flush=True)
        if handler.path == "/live.ts":
            super()._answer(handler)
            return
        path = handler.path
        if path == "/live.m3u8":
            kind, body = "application/vnd.apple.mpegurl", self.segments.playlist()
        elif path.startswith("/segment") and path.endswith(".ts"):
            kind, body = "video/mp2t", self.segments.segment(int(path[len("/segment") : -3]))
        else:
            kind, body = "text/plain", b"not found"
        status = "404 Not Found" if kind == "text/plain" else "200 OK"
        head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n\r\n"
        try:
            handler.wfile.write(head.encode() + body)  # in one write, as an origin answers
        except OSError:
            handler.close_connection = True  # the viewer left

    def _chunks(self, path: str) -> Chunks:
        for chunk in itertools.cycle(self._writes):
            yield chunk, len(chunk) * 8 / self.bitrate


def arguments_parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("port_file")
    parser.add_argument("--bitrate", type=int, default=4_000_000)
    parser.add_argument("--write-size", type=int, default=65536)
    parser.add_argument("--segment-seconds", type=float, default=1.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = arguments_parse()
    upstream = SampleUpstream(
        bitrate=arguments.bitrate,
        write_size=arguments.write_size,
        segment_seconds=arguments.segment_seconds,
        log_connections=True,
    )
    Path(arguments.port_file).write_text(str(upstream.port))
    threading.Event().wait()
