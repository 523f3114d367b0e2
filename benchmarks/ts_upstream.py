"""An IPTV upstream for the fan-out benchmark: serves MPEG-TS over HTTP at a fixed bitrate, as
one endless stream and as a live HLS playlist of the same bytes.

    python benchmarks/ts_upstream.py PORT_FILE [--bitrate 4000000] [--write-size 65536]
        [--segment-seconds 1]

Loops the Big Buck Bunny sample from ../shared when present, else synthetic packets.

- ``/live.ts``: the stream, ``--write-size`` bytes at a time, paced to the bitrate.
- ``/live.m3u8``: a live playlist of the last ``WINDOW`` segments of the same endless stream cut
  every ``--segment-seconds`` (``/segment{n}.ts``, each the bitrate's worth of bytes), published
  on the clock as a live encoder publishes them; answered with keep-alive, as HLS origins do.

Prints each connection it accepts.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import time
from pathlib import Path

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


async def stream(writer: asyncio.StreamWriter, chunks: list[bytes], bitrate: int) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: video/mp2t\r\nConnection: close\r\n\r\n")
    started, sent = time.monotonic(), 0
    for chunk in itertools.cycle(chunks):
        writer.write(chunk)
        await writer.drain()
        sent += len(chunk)
        await asyncio.sleep(max(0.0, started + sent * 8 / bitrate - time.monotonic()))


async def hls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, segments):
    """Answers ``path`` and every later request on the same connection."""
    while True:
        if path == "/live.m3u8":
            kind, body = "application/vnd.apple.mpegurl", segments.playlist()
        elif path.startswith("/segment") and path.endswith(".ts"):
            kind, body = "video/mp2t", segments.segment(int(path[len("/segment") : -3]))
        else:
            kind, body = "text/plain", b"not found"
        status = "404 Not Found" if kind == "text/plain" else "200 OK"
        head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()
        request = await reader.readuntil(b"\r\n\r\n")
        path = request.split(b" ", 2)[1].decode()


async def serve(args: argparse.Namespace, segments: Segments | None = None) -> None:
    """Serve until cancelled; ``segments`` are the HLS playlist's (made from ``args`` if None)."""
    source = stream_bytes()
    write_size = args.write_size - args.write_size % PACKET
    chunks = [source[i : i + write_size] for i in range(0, len(source), write_size)]
    segments = segments or Segments(source, args.bitrate, args.segment_seconds)
    connections = itertools.count(1)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        path = request.split(b" ", 2)[1].decode()
        print(f"upstream connection {next(connections)} {path}", flush=True)
        try:
            if path == "/live.ts":
                await stream(writer, chunks, args.bitrate)
            else:
                await hls(reader, writer, path, segments)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    Path(args.port_file).write_text(str(server.sockets[0].getsockname()[1]))  # noqa: ASYNC240
    async with server:
        await server.serve_forever()


def arguments_parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("port_file")
    parser.add_argument("--bitrate", type=int, default=4_000_000)
    parser.add_argument("--write-size", type=int, default=65536)
    parser.add_argument("--segment-seconds", type=float, default=1.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(serve(arguments_parse()))
