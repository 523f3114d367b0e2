"""An ASGI app for tests/core/test_backpressure.py, served by daphne: ``/paced`` and
``/unpaced`` stream CHUNKS parts of CHUNK_BYTES, each made when the app is asked for it;
``/made`` answers how many parts have been made so far."""

from __future__ import annotations

from core.backpressure import PacedStreams

CHUNKS = 200
CHUNK_BYTES = 16 * 1024
made = 0


async def stream(scope: dict, receive, send) -> None:
    global made
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    if scope["path"] == "/made":
        await send({"type": "http.response.body", "body": str(made).encode()})
        return
    for _ in range(CHUNKS):
        made += 1
        await send({"type": "http.response.body", "body": b"x" * CHUNK_BYTES, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


app = PacedStreams(
    stream, frozenset({"/paced"}), transport_buffer=64 * 1024, socket_buffer=16 * 1024
)
