"""Reloading the playlist: download (optional), parse, and swap the channel list atomically.

The server's two demo channels follow the playlist's own entries (``CHANNELS_DEMO``).

A reload either succeeds completely or changes nothing: the file on disk is replaced only after
the new content parsed, and the channel list, the version and the file change together inside
one database transaction.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from channels_admin.demo_channels import (
    DEFAULT_PLAYLIST_MARK,
    default_playlist_text,
    demo_entries,
)
from channels_admin.errors import PlaylistReloadError
from channels_admin.m3u import M3UParseError, M3UPlaylist, channel_ids, m3u_parse
from channels_admin.models import Channel, Playlist, StreamState
from channels_admin.services.downloads import DownloadError, url_download
from channels_admin.services.status import status_broadcast

logger = logging.getLogger(__name__)


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
        with _gc_paused():
            parsed = _with_demo_channels(m3u_parse(content))
    except (PlaylistReloadError, M3UParseError) as error:
        _failure_record(playlist, str(error))
        raise PlaylistReloadError(str(error)) from error
    with _gc_paused():
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


def _with_demo_channels(parsed: M3UPlaylist) -> M3UPlaylist:
    """The playlist with the demo channels after its own entries, so that one channel is always
    known to work (``CHANNELS_DEMO``; on by default). A demo channel whose URL the playlist
    already lists is not added again: the default playlist is those two channels."""
    if not settings.CHANNELS_DEMO:
        return parsed
    listed = {entry.url for entry in parsed.entries}
    missing = [entry for entry in demo_entries() if entry.url not in listed]
    if not missing:
        return parsed
    return M3UPlaylist(parsed.header_attrs, [*parsed.entries, *missing], parsed.ignored_lines)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector while a playlist's objects are built: they hold no
    cycles, and the collector's passes over 100,000 new entries cost ~15% of the load."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _source_read(playlist: Playlist) -> bytes:
    url = playlist.effective_url
    if url:
        return _download(url)
    path = playlist.effective_path
    if path == settings.CHANNELS_DEFAULT_PLAYLIST_PATH and _default_playlist_due(path):
        _atomic_write(path, default_playlist_text().encode())
    try:
        return path.read_bytes()
    except OSError as error:
        raise PlaylistReloadError(f"cannot read {path}: {error.strerror}") from None


def _default_playlist_due(path: Path) -> bool:
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return True
    except (OSError, UnicodeDecodeError):
        return False
    return DEFAULT_PLAYLIST_MARK in current and current != default_playlist_text()


def _download(url: str) -> bytes:
    body = io.BytesIO()
    try:
        url_download(
            url=url,
            into=body,
            max_bytes=settings.CHANNELS_PLAYLIST_MAX_BYTES,
            timeout=settings.CHANNELS_PLAYLIST_TIMEOUT_SEC,
        )
    except DownloadError as error:
        raise PlaylistReloadError(str(error)) from None
    return body.getvalue()


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
    _channels_insert(
        (
            playlist.pk,
            position,
            channel_id,
            entry.title,
            entry.url,
            entry.group,
            entry.logo,
            entry.tvg_id.strip(),
            entry.tvg_name,
            entry.chno,
            entry.user_agent,
            entry.referrer,
            json.dumps(entry.headers, ensure_ascii=False) if entry.headers else "{}",
            _extra_attrs_json(entry.attrs),
            f"{entry.title}\n{channel_id}".casefold(),
            entry.group.casefold(),
        )
        for position, (channel_id, entry) in enumerate(zip(ids, parsed.entries, strict=True))
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


# The order of the values _channels_replace produces.
INSERT_FIELDS = (
    "playlist",
    "position",
    "channel_id",
    "name",
    "stream_url",
    "group",
    "logo",
    "tvg_id",
    "tvg_name",
    "chno",
    "user_agent",
    "referrer",
    "http_headers",
    "attrs",
    "search_text",
    "search_group",
)
# Attributes with a column of their own are not repeated in ``attrs``.
OWN_COLUMNS = {"tvg-id", "tvg-name", "tvg-logo", "group-title", "tvg-chno"}


def _channels_insert(rows: Iterable[tuple]) -> None:
    """One prepared INSERT run for every row. bulk_create builds SQL per batch of rows and
    takes ~10 s for 100,000 channels on SQLite; this takes well under one."""
    table = connection.ops.quote_name(Channel._meta.db_table)
    columns = [Channel._meta.get_field(name).column for name in INSERT_FIELDS]
    quoted = ", ".join(connection.ops.quote_name(column) for column in columns)
    parameters = ", ".join(["%s"] * len(columns))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({quoted}) VALUES ({parameters})", rows)  # noqa: S608


def _extra_attrs_json(attrs: dict[str, str]) -> str:
    extra = {key: value for key, value in attrs.items() if key not in OWN_COLUMNS}
    return json.dumps(extra, ensure_ascii=False) if extra else "{}"


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
