"""The one HTTP server loop of the loopback fakes, and how they record a connection."""

from __future__ import annotations

import http.server
import select
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

Answer = Callable[[http.server.BaseHTTPRequestHandler], None]
SocketHook = Callable[[socket.socket], None]


@dataclass
class Connection:
    """One request to an upstream, as the upstream saw it."""

    path: str
    headers: dict[str, str]
    opened: float
    overlapping: int = 0  # earlier connections still open when this one arrived
    closed: float | None = None
    sock: socket.socket | None = field(default=None, repr=False)
    bytes_sent: int = 0


def peer_closed(sock: socket.socket) -> bool:
    """True once the peer has closed its side (EOF is readable) or the socket failed."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (OSError, ValueError):
        return True


class LoopbackServer:
    """A threaded HTTP server on a free loopback port that hands every GET to ``answer``, on a
    thread of its own. With ``keep_alive`` it speaks HTTP/1.1 (answers must then say their
    length or close); ``opened`` and ``closed`` see each TCP connection come and go."""

    def __init__(
        self,
        answer: Answer,
        *,
        keep_alive: bool = False,
        opened: SocketHook | None = None,
        closed: SocketHook | None = None,
    ) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def setup(self) -> None:
                super().setup()
                if opened:
                    opened(self.connection)

            def finish(self) -> None:
                if closed:
                    closed(self.connection)
                super().finish()

            def do_GET(self) -> None:
                answer(self)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # a close waits for the loop's next look at its flag: half a second by default, and the
        # tests close hundreds of these
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def port(self) -> int:
        return self._server.server_port

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
