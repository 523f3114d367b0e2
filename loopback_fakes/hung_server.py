"""A TCP server on a free loopback port that takes every connection and reads whatever comes,
and never answers: a hung Redis, or a proxy whose backend is gone."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading


class HungServer:
    """Use as a context manager; ``url`` names it for a Redis client, ``received`` holds what
    the clients sent. On exit it shuts every connection down and waits for their threads, so
    that none outlives it (a client that kept its connection would otherwise keep one, ending
    whenever that client is collected: in the middle of another test that counts threads)."""

    def __init__(self) -> None:
        self.received = bytearray()
        lock = threading.Lock()
        received = self.received
        connections: set[socket.socket] = set()
        self._connections = connections

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with contextlib.suppress(OSError):  # a client that resets is gone, no more
                    while data := self.request.recv(65536):
                        with lock:
                            received.extend(data)

        class Server(socketserver.ThreadingTCPServer):
            block_on_close = True  # server_close() joins the handlers' threads (not daemons)

            def process_request(self, request, client_address) -> None:
                # listed before its handler starts, on the thread that accepts (which has
                # stopped when shutdown() returns): none is missed on exit
                with lock:
                    connections.add(request)
                super().process_request(request, client_address)

        self._lock = lock
        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"redis://127.0.0.1:{self._server.server_address[1]}/0"

    def __enter__(self) -> HungServer:
        self._loop = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._loop.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        with self._lock:
            for connection in self._connections:
                with contextlib.suppress(OSError):  # its client closed it already
                    connection.shutdown(socket.SHUT_RDWR)  # its handler's read ends
        self._server.server_close()
        self._loop.join()
