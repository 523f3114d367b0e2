"""A TCP server on a free loopback port that takes every connection and reads whatever comes,
and never answers: a hung Redis, or a proxy whose backend is gone."""

from __future__ import annotations

import contextlib
import socketserver
import threading


class HungServer:
    """Use as a context manager; ``url`` names it for a Redis client, ``received`` holds what
    the clients sent."""

    def __init__(self) -> None:
        self.received = bytearray()
        lock = threading.Lock()
        received = self.received

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with contextlib.suppress(OSError):  # a client that resets is gone, no more
                    while data := self.request.recv(65536):
                        with lock:
                            received.extend(data)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            block_on_close = False

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"redis://127.0.0.1:{self._server.server_address[1]}/0"

    def __enter__(self) -> HungServer:
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
