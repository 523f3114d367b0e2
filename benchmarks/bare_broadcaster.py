"""The ceiling of the fan-out benchmark: a bare ASGI broadcaster, no Django, no Channels.

    UPSTREAM_URL=http://127.0.0.1:PORT/live.ts daphne benchmarks.bare_broadcaster:app

One upstream read loop puts every chunk into an unbounded queue per viewer; each viewer's
response sends what its queue yields. Nothing else: no flow control, no status, no cleanup.
"""

from __future__ import annotations

import asyncio
import os
from urllib.parse import urlsplit

viewers: set[asyncio.Queue[bytes]] = set()
pump: asyncio.Task[None] | None = None


async def upstream_read() -> None:
    url = urlsplit(os.environ["UPSTREAM_URL"])
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(f"GET {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode())
    await reader.readuntil(b"\r\n\r\n")
    while chunk := await reader.read(65536):
        for queue in viewers:
            queue.put_nowait(chunk)


async def app(scope: dict, receive, send) -> None:
    global pump
    if scope["type"] != "http":
        return
    if pump is None:
        pump = asyncio.ensure_future(upstream_read())
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    viewers.add(queue)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"video/mp2t")],
        }
    )
    try:
        while True:
            await send({"type": "http.response.body", "body": await queue.get(), "more_body": True})
    finally:
        viewers.discard(queue)
