"""A real IPTV upstream for tests: an HTTP server on loopback streaming MPEG-TS packets.

Each packet is 188 bytes: the sync byte, three header bytes, an 8-byte sequence number, and
random bytes drawn per connection, so bytes that match across viewers came from one connection.
The server records every connection, and at each new one whether an earlier one was still open.
"""

from __future__ import annotations

import http.server
import random
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

PACKET = 188
PACKETS_PER_WRITE = 7


@dataclass
class Connection:
    path: str
    headers: dict[str, str]
    opened: float
    overlapping: int = 0  # earlier connections still open when this one arrived
    closed: float | None = None
    sock: socket.socket | None = field(default=None, repr=False)
    bytes_sent: int = 0


def ts_packet(sequence: int, rng: random.Random) -> bytes:
    return b"\x47\x01\x00\x10" + struct.pack(">Q", sequence) + rng.randbytes(PACKET - 12)


def packet_sequence(packet: bytes) -> int:
    return struct.unpack(">Q", packet[4:12])[0]


def peer_closed(sock: socket.socket) -> bool:
    """True once the peer has closed its side (EOF is readable) or the socket failed."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (OSError, ValueError):
        return True


class TsUpstream:
    """Behaviour is switched at run time: ``refuse`` answers 503, ``stall`` stops writing
    (keeping the connection open), ``garbage`` sends bytes that are not TS, ``close_at_once``
    answers 200 and closes without a byte of body, and :meth:`drop_all` closes every open
    connection."""

    def __init__(self, *, bitrate_bps: int = 2_000_000, prefix: bytes = b"") -> None:
        self.bitrate_bps = bitrate_bps
        self.prefix = prefix  # bytes sent before the first packet (tests packet alignment)
        self.connections: list[Connection] = []
        self.refuse = False
        self.stall = False
        self.garbage = False
        self.close_at_once = False
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._drop_generation = 0
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                upstream._serve(self)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str = "/live.ts") -> str:
        return f"http://127.0.0.1:{self._server.server_port}{path}"

    @property
    def open_connections(self) -> list[Connection]:
        with self._lock:
            return [c for c in self.connections if c.closed is None]

    def drop_all(self) -> None:
        self._drop_generation += 1

    def wait_for(self, predicate, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.02)
        raise AssertionError(f"upstream: condition not met within {timeout}s: {self.connections}")

    def close(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        connection = Connection(
            path=handler.path,
            headers=dict(handler.headers.items()),
            opened=time.monotonic(),
            sock=handler.connection,
        )
        with self._lock:
            earlier = [c for c in self.connections if c.closed is None]
            connection.overlapping = sum(not peer_closed(c.sock) for c in earlier)
            self.connections.append(connection)
        try:
            if self.refuse:
                handler.send_error(503, "refused by test")
                return
            handler.send_response(200)
            handler.send_header("Content-Type", "video/mp2t")
            handler.end_headers()
            if self.close_at_once:
                handler.close_connection = True
                return
            self._stream(handler, connection)
        except OSError:
            pass
        finally:
            connection.closed = time.monotonic()

    def _stream(self, handler: http.server.BaseHTTPRequestHandler, connection: Connection) -> None:
        rng = random.Random()
        generation = self._drop_generation
        write_interval = PACKET * PACKETS_PER_WRITE * 8 / self.bitrate_bps
        if self.prefix:
            handler.wfile.write(self.prefix)
        sequence = 0
        next_write = time.monotonic()
        while not self._stopping.is_set() and generation == self._drop_generation:
            if peer_closed(handler.connection):
                return
            if self.stall:
                time.sleep(0.01)
                next_write = time.monotonic()
                continue
            if self.garbage:
                chunk = rng.randbytes(PACKET * PACKETS_PER_WRITE).replace(b"\x47", b"\x00")
            else:
                chunk = b"".join(ts_packet(sequence + i, rng) for i in range(PACKETS_PER_WRITE))
                sequence += PACKETS_PER_WRITE
            handler.wfile.write(chunk)
            connection.bytes_sent += len(chunk)
            next_write += write_interval
            time.sleep(max(0.0, next_write - time.monotonic()))
