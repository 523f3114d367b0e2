"""An endless MPEG-TS answer over HTTP, which every loopback TS upstream is: each GET is
recorded (with whether an earlier connection was still open when it came), answered 503 where
the upstream refuses it, else 200 and the upstream's chunks, paced to real time, until the
viewer leaves, the upstream closes or :meth:`TsStream.drop` cuts it."""

from __future__ import annotations

import abc
import collections
import http.server
import threading
import time
from collections.abc import Iterator

from loopback_fakes.server import Connection, LoopbackServer, peer_closed

# What an upstream sends: bytes and the seconds of real time they stand for, or None while it
# stalls (sends nothing and keeps the connection open).
Chunks = Iterator[tuple[bytes | None, float]]
CATCH_UP_SEC = 0.5  # a writer that fell behind sends at most this much faster than real time


class TsStream(abc.ABC):
    """The server, its record of connections and the pacing; a subclass says what each path
    sends (:meth:`_chunks`) and whether it refuses it (:meth:`_refused`)."""

    keep_alive = False  # HTTP/1.1 for other answers beside the stream (an HLS playlist)

    def __init__(self) -> None:
        self.connections: list[Connection] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._drops: collections.Counter[str | None] = collections.Counter()
        self._server = LoopbackServer(self._answer, keep_alive=self.keep_alive)

    @property
    def port(self) -> int:
        return self._server.port

    def url(self, path: str = "/live.ts") -> str:
        return self._server.url(path)

    def of(self, path: str) -> list[Connection]:
        with self._lock:
            return [c for c in self.connections if c.path == path]

    @property
    def open_connections(self) -> list[Connection]:
        with self._lock:
            return [c for c in self.connections if c.closed is None]

    def drop(self, path: str | None = None) -> None:
        """Close the open connections of ``path``, or of every path (what the upstream does
        then decides the next ones)."""
        with self._lock:
            self._drops[path] += 1

    def close(self) -> None:
        self._stopping.set()
        self._server.close()

    def _refused(self, path: str) -> bool:
        return False

    @abc.abstractmethod
    def _chunks(self, path: str) -> Chunks:
        """What the upstream sends on ``path``: each kind of fake says it."""

    def _answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
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
            drops = self._dropped(connection.path)
        try:
            if self._refused(connection.path):
                handler.send_error(503, "refused by test")
                return
            handler.send_response(200)
            handler.send_header("Content-Type", "video/mp2t")
            handler.send_header("Connection", "close")
            handler.end_headers()
            self._stream(handler, connection, drops)
        except OSError:
            pass
        finally:
            connection.closed = time.monotonic()

    def _dropped(self, path: str) -> tuple[int, int]:
        return self._drops[None], self._drops[path]

    def _stream(
        self,
        handler: http.server.BaseHTTPRequestHandler,
        connection: Connection,
        drops: tuple[int, int],
    ) -> None:
        due = time.monotonic()
        for chunk, seconds in self._chunks(connection.path):
            if (
                self._stopping.is_set()
                or self._dropped(connection.path) != drops
                or peer_closed(handler.connection)
            ):
                return
            if chunk is None:
                time.sleep(0.01)
                due = time.monotonic()
                continue
            handler.wfile.write(chunk)
            connection.bytes_sent += len(chunk)
            # paced from the last write, so that a change of speed takes effect at once
            due = max(due, time.monotonic() - CATCH_UP_SEC) + seconds
            time.sleep(max(0.0, due - time.monotonic()))
