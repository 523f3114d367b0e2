"""A stream made as it is read waits for a client that reads slowly (core/backpressure.py's
PacedStreams), on the real server, daphne."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
import requests

from tests.conftest import ROOT, free_port
from tests.core.paced_app import CHUNK_BYTES, CHUNKS


@pytest.fixture(scope="module")
def server():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "tests.core.paced_app:app"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(f"{base}/made", timeout=2)
            break
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    yield base
    process.terminate()
    process.wait(timeout=10)


def made(base: str) -> int:
    return int(requests.get(f"{base}/made", timeout=5).text)


def reader_that_waits(base: str, path: str) -> socket.socket:
    """A connection that asks for ``path`` and reads nothing yet, with a small receive buffer."""
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.connect(("127.0.0.1", int(base.rsplit(":", 1)[1])))
    client.sendall(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
    return client


def read_all(client: socket.socket) -> bytes:
    client.settimeout(10)
    data = b""
    while not data.endswith(b"\r\n0\r\n\r\n"):
        data += client.recv(65536)
    client.close()
    return data


def test_a_paced_stream_waits_for_its_reader_and_loses_nothing(server):
    before = made(server)
    client = reader_that_waits(server, "/paced")
    time.sleep(1.0)
    waiting = made(server) - before
    data = read_all(client)

    # 64 KiB in daphne's buffer, the socket's buffers, a part in hand: a few parts, not 200
    assert 3 <= waiting <= 16, waiting
    assert made(server) - before == CHUNKS
    assert data.count(b"x") == CHUNKS * CHUNK_BYTES


def test_without_pacing_the_whole_stream_is_made_at_once(server):
    before = made(server)
    client = reader_that_waits(server, "/unpaced")
    time.sleep(1.0)
    waiting = made(server) - before
    data = read_all(client)

    assert waiting == CHUNKS
    assert data.count(b"x") == CHUNKS * CHUNK_BYTES
