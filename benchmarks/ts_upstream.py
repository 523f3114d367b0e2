"""An IPTV upstream for the fan-out benchmark: serves MPEG-TS over HTTP at a fixed bitrate.

    python benchmarks/ts_upstream.py PORT_FILE [--bitrate 4000000] [--write-size 65536]

Loops the Big Buck Bunny sample from ../shared when present, else synthetic packets. Writes
``--write-size`` bytes at a time, paced to the bitrate, and prints each connection it accepts.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "shared/data/media/bbb_h264_aac_320x180_6s.ts"
PACKET = 188


def stream_bytes() -> bytes:
    if SAMPLE.exists():
        return SAMPLE.read_bytes()
    return b"".join(b"\x47\x01\x00\x10" + bytes([n % 256]) * (PACKET - 4) for n in range(2000))


async def serve(args: argparse.Namespace) -> None:
    source = stream_bytes()
    write_size = args.write_size - args.write_size % PACKET
    chunks = [source[i : i + write_size] for i in range(0, len(source), write_size)]
    connections = itertools.count(1)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        print(f"upstream connection {next(connections)}", flush=True)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: video/mp2t\r\nConnection: close\r\n\r\n")
        started, sent = time.monotonic(), 0
        try:
            for chunk in itertools.cycle(chunks):
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
                await asyncio.sleep(max(0.0, started + sent * 8 / args.bitrate - time.monotonic()))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    Path(args.port_file).write_text(str(server.sockets[0].getsockname()[1]))  # noqa: ASYNC240
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("port_file")
    parser.add_argument("--bitrate", type=int, default=4_000_000)
    parser.add_argument("--write-size", type=int, default=65536)
    asyncio.run(serve(parser.parse_args()))
