"""One connection to a source: its MPEG-TS bytes in whole packets, whether the source answers
with MPEG-TS or with an HLS playlist (read by ``hls_input.py``, told by the answer, not by the
URL).

- Each connection has its own client session, closed when the read ends (also on cancel), so
  no pooled connection lingers, and every address it opens is checked
  (``upstream_addresses.py``): redirects and segments too.
- Reads of an MPEG-TS answer are gathered into chunks of up to 64 KiB or 100 ms, because each
  chunk costs the hub one wake-up and one write per viewer; the first chunk of a connection
  goes out at once, so a new stream starts promptly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp

from channels_admin.streaming.hls_input import (
    PLAYLIST_MAX_BYTES,
    HlsReader,
    Response,
    looks_like_hls,
)
from channels_admin.streaming.sources import Upstream
from channels_admin.streaming.ts import PacketAligner
from channels_admin.streaming.upstream_addresses import UpstreamAddresses

# An upstream that sends this much without two packets in sync is not sending MPEG-TS.
SYNC_GIVE_UP_BYTES = 1024 * 1024
SEGMENT_MAX_BYTES = 256 * 1024 * 1024  # an HLS segment, key or init section


class UpstreamError(Exception):
    """A source failed in a way its text says for the status."""


class UpstreamReader:
    """Opens connections to sources, one per :meth:`read`."""

    def __init__(
        self,
        *,
        connect_timeout: float,
        stall_timeout: float,
        flush_bytes: int = 64 * 1024,
        flush_seconds: float = 0.1,
        addresses: UpstreamAddresses | None = None,
    ) -> None:
        # addresses None: any address (the hub's own tests); the server passes its settings'
        self._addresses = addresses
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=stall_timeout
        )
        self.stall_timeout = stall_timeout
        self._flush_bytes = flush_bytes
        self._flush_seconds = flush_seconds

    async def read(self, upstream: Upstream, hls: HlsReader) -> AsyncIterator[bytes]:
        """One connection's TS bytes: the stream itself, or the segments of an HLS playlist
        read one request at a time over the same client (``hls`` keeps the source's place in
        its playlist across connections)."""
        # aiohttp keeps reading the socket while its buffer has room and hands over everything
        # buffered at once; a client that reads once per request of the consumer falls behind
        # the stream when the event loop is busy with a thousand viewers.
        addresses = self._addresses
        checked = addresses is not None and upstream.url not in addresses.trusted_urls
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=1, socket_factory=addresses.socket_factory if checked else None
            ),
            timeout=self._timeout,
            auto_decompress=False,
        ) as session:
            async with session.get(upstream.url, headers=dict(upstream.headers)) as response:
                if response.status != 200:
                    raise UpstreamError(f"the upstream answered HTTP {response.status}")
                head = await response.content.readany()
                if not looks_like_hls(response.content_type, head):
                    async with contextlib.aclosing(
                        self._batched(_ts_reads(response, head))
                    ) as reads:
                        async for data in reads:
                            yield data
                    return
                body = head + await _body(response, PLAYLIST_MAX_BYTES - len(head))
                playlist = Response(str(response.url), 200, response.content_type, body)

            async def fetch(url: str, byterange: tuple[int, int] | None) -> Response:
                headers = dict(upstream.headers)
                if byterange is not None:
                    headers["Range"] = f"bytes={byterange[0]}-{byterange[0] + byterange[1] - 1}"
                async with session.get(url, headers=headers) as answer:
                    body = await _body(answer, SEGMENT_MAX_BYTES) if answer.ok else b""
                    return Response(str(answer.url), answer.status, answer.content_type, body)

            # Not batched: segments come whole, and a batch would hold a segment's tail back
            # until the next one came.
            # Closed with this iterator: the segment fetched ahead stops with the connection.
            aligner = PacketAligner()
            async with contextlib.aclosing(hls.stream(fetch, upstream.url, playlist)) as stream:
                async for data in stream:
                    data = aligner.feed(data)
                    if data:
                        yield data

    async def _batched(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """Gather reads into fewer, larger chunks: every chunk costs a wake-up and a write per
        viewer, so with a thousand viewers the count matters far more than the size. The
        first chunk of a connection goes out at once, so a new stream starts promptly."""
        loop = asyncio.get_running_loop()
        pending: list[bytes] = []
        size, since, first = 0, 0.0, True
        async for data in chunks:
            if not pending:
                since = loop.time()
            pending.append(data)
            size += len(data)
            if first or size >= self._flush_bytes or loop.time() - since >= self._flush_seconds:
                yield pending[0] if len(pending) == 1 else b"".join(pending)
                pending.clear()
                size, first = 0, False
        if pending:  # what came last before the upstream ended
            yield b"".join(pending)


async def _body(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The rest of ``response``'s body, all of it (a read gives only what has arrived), and
    no more than ``limit`` bytes."""
    parts, size = [], 0
    async for part in response.content.iter_any():
        size += len(part)
        if size > limit:
            raise UpstreamError(f"the upstream sent more than {limit // 1024 // 1024} MiB at once")
        parts.append(part)
    return b"".join(parts)


async def _ts_reads(response: aiohttp.ClientResponse, head: bytes) -> AsyncIterator[bytes]:
    """An MPEG-TS response's bytes in whole packets, from ``head`` (its first read) on."""
    aligner = PacketAligner()
    data = aligner.feed(head)
    if data:
        yield data
    async for raw in response.content.iter_any():
        data = aligner.feed(raw)
        if data:
            aligner.skipped = 0
            yield data
        elif aligner.skipped > SYNC_GIVE_UP_BYTES:
            raise UpstreamError("the upstream is not sending MPEG-TS")
