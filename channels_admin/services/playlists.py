"""Reloading the playlist: download (optional), parse, and swap the channel list atomically.

A reload either succeeds completely or changes nothing: the file on disk is replaced only after
the new content parsed, and the channel list, the version and the file change together inside
one database transaction.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import requests
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from channels_admin.errors import PlaylistReloadError
from channels_admin.m3u import M3UParseError, M3UPlaylist, channel_ids, m3u_parse
from channels_admin.models import Channel, Playlist, StreamState
from channels_admin.services.stream import status_broadcast

logger = logging.getLogger(__name__)

BULK_BATCH = 2000


@dataclass(frozen=True)
class ReloadResult:
    channels: int
    version: int


def playlist_get_or_create() -> Playlist:
    playlist, _ = Playlist.objects.get_or_create(name=Playlist.DEFAULT_NAME)
    return playlist


def playlist_reload(*, playlist: Playlist | None = None) -> ReloadResult:
    """Reload the playlist from its source; raise :class:`PlaylistReloadError` on any failure."""
    playlist = playlist or playlist_get_or_create()
    try:
        content = _source_read(playlist)
        parsed = m3u_parse(content)
    except (PlaylistReloadError, M3UParseError) as error:
        _failure_record(playlist, str(error))
        raise PlaylistReloadError(str(error)) from error
    result = _channels_replace(playlist, parsed, content if playlist.effective_url else None)
    async_to_sync(status_broadcast)()
    logger.info("playlist reloaded: %d channels, version %d", result.channels, result.version)
    return result


def playlist_ensure_loaded() -> None:
    """Load the playlist when the database has none yet (at server start); never raises."""
    try:
        if Playlist.objects.filter(version__gt=0).exists():
            return
        playlist_reload()
    except (PlaylistReloadError, DatabaseError) as error:
        logger.error("could not load the playlist at start: %s", error)


def default_playlist_text() -> str:
    """The playlist used when none is configured: the server's own demo channels."""
    base = settings.SERVER_URL
    return (
        "#EXTM3U\n"
        '#EXTINF:-1 tvg-id="demo.1" tvg-chno="1" group-title="Demo",Test pattern 1\n'
        f"{base}/tv/demo/1.ts\n"
        '#EXTINF:-1 tvg-id="demo.2" tvg-chno="2" group-title="Demo",Test pattern 2\n'
        f"{base}/tv/demo/2.ts\n"
    )


def _source_read(playlist: Playlist) -> bytes:
    url = playlist.effective_url
    if url:
        return _download(url)
    path = playlist.effective_path
    if path == settings.CHANNELS_DEFAULT_PLAYLIST_PATH and not path.exists():
        _atomic_write(path, default_playlist_text().encode())
    try:
        return path.read_bytes()
    except OSError as error:
        raise PlaylistReloadError(f"cannot read {path}: {error.strerror}") from None


def _download(url: str) -> bytes:
    if not url.startswith(("http://", "https://")):
        raise PlaylistReloadError(f"the playlist URL must be http or https, got {url!r}")
    limit = settings.CHANNELS_PLAYLIST_MAX_BYTES
    timeout = settings.CHANNELS_PLAYLIST_TIMEOUT_SEC
    try:
        with requests.get(url, stream=True, timeout=(min(timeout, 10), timeout)) as response:
            if response.status_code != 200:
                raise PlaylistReloadError(f"download of {url} answered HTTP {response.status_code}")
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > limit:
                raise PlaylistReloadError(f"the playlist is larger than {limit} bytes")
            chunks, size = [], 0
            for chunk in response.iter_content(chunk_size=64 * 1024):
                size += len(chunk)
                if size > limit:
                    raise PlaylistReloadError(f"the playlist is larger than {limit} bytes")
                chunks.append(chunk)
    except requests.RequestException as error:
        raise PlaylistReloadError(f"download of {url} failed: {error}") from None
    return b"".join(chunks)


def _atomic_write(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


@transaction.atomic
def _channels_replace(
    playlist: Playlist, parsed: M3UPlaylist, download: bytes | None
) -> ReloadResult:
    playlist = Playlist.objects.select_for_update().get(pk=playlist.pk)
    Channel.objects.filter(playlist=playlist).delete()
    ids = channel_ids(parsed.entries)
    Channel.objects.bulk_create(
        (
            Channel(
                playlist=playlist,
                position=position,
                channel_id=channel_id,
                name=entry.title,
                stream_url=entry.url,
                group=entry.group,
                logo=entry.logo,
                tvg_id=entry.tvg_id,
                chno=entry.chno,
                user_agent=entry.user_agent,
                referrer=entry.referrer,
                attrs=entry.attrs,
                search_name=entry.title.casefold(),
                search_id=channel_id.casefold(),
                search_group=entry.group.casefold(),
            )
            for position, (channel_id, entry) in enumerate(zip(ids, parsed.entries, strict=True))
        ),
        batch_size=BULK_BATCH,
    )
    playlist.version += 1
    playlist.epg_urls = parsed.epg_urls
    playlist.loaded_at = timezone.now()
    playlist.last_error = ""
    playlist.last_error_at = None
    playlist.save()
    _state_rename_current(playlist)
    if download is not None:
        # Last, so that a failure here rolls the list back; the file only changes with the list.
        _atomic_write(playlist.effective_path, download)
    return ReloadResult(channels=len(ids), version=playlist.version)


def _state_rename_current(playlist: Playlist) -> None:
    state = StreamState.objects.select_for_update().filter(pk=StreamState.SINGLETON_PK).first()
    if state is None or not state.current_stream_url:
        return
    match = (
        Channel.objects.filter(playlist=playlist, stream_url=state.current_stream_url)
        .order_by("position")
        .first()
    )
    if match is not None:
        state.channel_name = match.name
        state.channel_id = match.channel_id
        state.save(update_fields=["channel_name", "channel_id", "updated_at"])


def _failure_record(playlist: Playlist, detail: str) -> None:
    Playlist.objects.filter(pk=playlist.pk).update(last_error=detail, last_error_at=timezone.now())
