"""What the server downloads on its own: a playlist, a programme guide. Bounded in size and
time, and fetched only from the addresses the hub may fetch (``streaming/upstream_addresses.py``,
``CHANNELS_UPSTREAM_DENY``): a playlist names its guide, and a playlist may come from anywhere,
so a guide URL of ``http://127.0.0.1:7263/...`` or of the cloud's metadata address must not
make the server fetch from itself or its own network. Every connection is checked as it opens,
a redirect's too, as the hub's are.
"""

from __future__ import annotations

from typing import IO

import aiohttp
from asgiref.sync import async_to_sync

from channels_admin.runtime import upstream_addresses
from channels_admin.streaming.failure_reasons import failure_reason
from channels_admin.streaming.upstream_addresses import UpstreamDenied

CHUNK_BYTES = 64 * 1024
# Within the download's deadline: the most a connection may take to open, and a server may go
# without sending a byte (each cut at the deadline when that is shorter).
CONNECT_TIMEOUT_SEC = 10
READ_TIMEOUT_SEC = 30


class DownloadError(Exception):
    """A download failed; the message says why, in words for the admin page."""


def url_download(
    *, url: str, into: IO[bytes], max_bytes: int, timeout: float, decode: bool = True
) -> None:
    """``url``'s body written to ``into``: at most ``max_bytes`` (after ``Content-Encoding``
    when ``decode``; as sent otherwise), within ``timeout`` seconds; :class:`DownloadError`
    otherwise, ``into`` then holding part of it."""
    if not url.startswith(("http://", "https://")):
        raise DownloadError(f"download of {url}: only http and https URLs are fetched")
    limits = aiohttp.ClientTimeout(
        total=timeout,
        sock_connect=min(timeout, CONNECT_TIMEOUT_SEC),
        sock_read=min(timeout, READ_TIMEOUT_SEC),
    )
    async_to_sync(_download)(url, into, max_bytes, limits, decode)


async def _download(
    url: str, into: IO[bytes], max_bytes: int, limits: aiohttp.ClientTimeout, decode: bool
) -> None:
    too_large = f"download of {url}: larger than {max_bytes} bytes"
    connector = aiohttp.TCPConnector(limit=1, socket_factory=upstream_addresses().socket_factory)
    try:
        async with (
            aiohttp.ClientSession(
                connector=connector, timeout=limits, auto_decompress=decode
            ) as session,
            session.get(url) as answer,
        ):
            if answer.status != 200:
                raise DownloadError(f"download of {url} answered HTTP {answer.status}")
            if (answer.content_length or 0) > max_bytes:
                raise DownloadError(too_large)  # sent, even compressed, it is larger still
            size = 0
            async for chunk in answer.content.iter_chunked(CHUNK_BYTES):
                size += len(chunk)
                if size > max_bytes:
                    raise DownloadError(too_large)
                into.write(chunk)
    except aiohttp.SocketTimeoutError:  # before TimeoutError, which it is too
        raise DownloadError(
            f"download of {url}: the server sent nothing for {limits.sock_read:g} s"
        ) from None
    except aiohttp.ConnectionTimeoutError:
        raise DownloadError(
            f"download of {url}: no connection within {limits.sock_connect:g} s"
        ) from None
    except TimeoutError:
        raise DownloadError(f"download of {url} took longer than {limits.total:g} s") from None
    except aiohttp.ClientConnectorError as error:
        if isinstance(error.os_error, UpstreamDenied):
            raise DownloadError(
                f"download of {url} refused: its address is not one the server may fetch "
                "(CHANNELS_UPSTREAM_DENY)"
            ) from None
        raise DownloadError(f"download of {url} failed: {failure_reason(error)}") from None
    except aiohttp.ClientError as error:
        raise DownloadError(f"download of {url} failed: {failure_reason(error)}") from None
    into.flush()
