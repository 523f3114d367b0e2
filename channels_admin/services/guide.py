"""Refreshing the programme guide (XMLTV): download, parse as it streams, store, swap.

The guide's sources are the URLs set by hand (``CHANNELS_GUIDE_URL``), then the playlist's own
(``url-tvg``). Each is downloaded into a temporary file (a size cap, timeouts, a deadline) and
parsed from there a chunk at a time (``channels_admin/xmltv.py``), its rows written in batches
under a new guide version beside the one shown. Only when every source parsed does a short
transaction make the new version the shown one; the old rows are then deleted. So a guide that
fails to fetch or parse changes nothing that is shown, and its reason is kept for the admin;
and no write lock is held for the minute a 100 MB guide takes (the hub records its status
meanwhile). A channel ID that two sources both list belongs to the first.

One refresh runs at a time: within a process a lock says so, and with ``REDIS_URL`` a Redis
lock across the server processes (the first to find the guide due fetches it; the others find
it fresh). The server refreshes every ``CHANNELS_GUIDE_REFRESH_SEC``
(:func:`guide_refresh_periodically`, started by ``apps.py``); ``manage.py guide_refresh`` and
the admin's button refresh at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import IO

import redis
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from channels_admin.errors import GuideRefreshBusy, GuideRefreshError
from channels_admin.models import GuideChannel, GuideChannelName, GuideState, Playlist, Programme
from channels_admin.services.downloads import DownloadError, url_download
from channels_admin.services.status import status_broadcast
from channels_admin.xmltv import GuideChannel as ParsedChannel
from channels_admin.xmltv import XMLTVParseError, xmltv_parse

logger = logging.getLogger(__name__)

BATCH_ROWS = 10_000  # rows written per transaction while a guide is staged
NAMES_PER_CHANNEL = 5  # display names of a channel kept for matching
# A refresh that failed is tried again after this long (or the refresh interval, if shorter).
RETRY_SEC = 300
# How often the server looks whether the guide is due (or the interval, if shorter).
CHECK_EVERY_SEC = 30
# The Redis lock expires this long after a process that held it died mid-refresh.
LOCK_SEC = 3600
REDIS_TIMEOUT_SEC = 5  # the refresh lock's commands fail within this where Redis never answers


@dataclass(frozen=True)
class GuideRefreshResult:
    version: int
    channels: int
    programmes: int
    left_out: int


def guide_sources() -> list[str]:
    """The guide URLs, those set by hand first, each once; only http and https."""
    playlist_urls = (
        Playlist.objects.filter(name=Playlist.DEFAULT_NAME).values_list("epg_urls", flat=True)
    ).first() or []
    urls = [*settings.CHANNELS_GUIDE_URLS, *playlist_urls]
    return list(dict.fromkeys(url for url in urls if url.startswith(("http://", "https://"))))


def guide_refresh() -> GuideRefreshResult:
    """Fetch every source and show the new guide; :class:`GuideRefreshError` (the last good
    guide kept, the reason recorded) on any failure, :class:`GuideRefreshBusy` while another
    refresh runs."""
    with _refresh_lock() as held:
        if not held:
            raise GuideRefreshBusy("busy")
        result = _refresh()
    async_to_sync(status_broadcast)()
    return result


def guide_refresh_due() -> bool:
    """Whether the periodic refresh should run: there is a guide URL, and it was never tried,
    or last tried longer ago than the interval (than :data:`RETRY_SEC` after a failure)."""
    if not guide_sources():
        return False  # nothing to fetch; asked by hand, a refresh says so
    state = GuideState.load()
    if state.attempted_at is None:
        return True
    every = settings.CHANNELS_GUIDE_REFRESH_SEC
    failed = bool(state.last_error) and state.last_error_at == state.attempted_at
    wait = min(every, RETRY_SEC) if failed else every
    return timezone.now() - state.attempted_at >= timedelta(seconds=wait)


async def guide_refresh_periodically() -> None:
    """Refresh the guide whenever it is due, for as long as the server runs (a background
    task the app gives the server); nothing with ``CHANNELS_GUIDE_REFRESH_SEC=0``."""
    every = settings.CHANNELS_GUIDE_REFRESH_SEC
    if not every:
        return
    while True:
        try:
            if await database_sync_to_async(guide_refresh_due)():
                # Not the thread the views share: a refresh takes a minute for a large guide.
                await database_sync_to_async(guide_refresh, thread_sensitive=False)()
        except (GuideRefreshError, GuideRefreshBusy):
            pass  # logged by the refresh; a busy one is another's
        except Exception:
            logger.exception("guide: the periodic refresh failed")
        await asyncio.sleep(min(every, CHECK_EVERY_SEC))


_local_lock = threading.Lock()


@contextlib.contextmanager
def _refresh_lock() -> Iterator[bool]:
    """Yields whether this refresh may run: no other in this process, nor (with Redis) in
    another."""
    if not _local_lock.acquire(blocking=False):
        yield False
        return
    try:
        if not settings.REDIS_URL:
            yield True
            return
        client = redis.Redis.from_url(
            settings.REDIS_URL,
            socket_timeout=REDIS_TIMEOUT_SEC,
            socket_connect_timeout=REDIS_TIMEOUT_SEC,
        )
        with client:  # closed however the lock's commands end
            lock = client.lock(
                f"{settings.CHANNELS_RELAY_PREFIX}:guide-refresh", timeout=LOCK_SEC, blocking=False
            )
            if not lock.acquire():
                yield False
                return
            try:
                yield True
            finally:
                with contextlib.suppress(redis.RedisError):
                    lock.release()
    finally:
        _local_lock.release()


def _refresh() -> GuideRefreshResult:
    sources = guide_sources()
    version = _attempt_begin()
    try:
        if not sources:
            raise GuideRefreshError(
                "no guide URL: set CHANNELS_GUIDE_URL, or a playlist with url-tvg"
            )
        staged = _Staging(version, now=timezone.now())
        for index, url in enumerate(sources):
            with tempfile.TemporaryFile(prefix="guide-") as download:
                _download(url, download)
                try:
                    staged.source_add(index, xmltv_parse(download, max_bytes=_max_bytes()))
                except XMLTVParseError as error:
                    raise GuideRefreshError(f"{url}: {error}") from None
        result = staged.finish()
    except GuideRefreshError as error:
        _staged_delete(version)
        _failure_record(error.message)
        logger.warning("guide refresh failed: %s", error.message)
        raise
    except BaseException:
        _staged_delete(version)
        raise
    _swap(result, sources)
    logger.info(
        "guide refreshed: %d channels, %d programmes, version %d",
        result.channels,
        result.programmes,
        result.version,
    )
    return result


def _max_bytes() -> int:
    return settings.CHANNELS_GUIDE_MAX_BYTES


def _attempt_begin() -> int:
    """Record the attempt and give out a version number of its own for its rows."""
    with transaction.atomic():
        state, _ = GuideState.objects.select_for_update().get_or_create(pk=GuideState.SINGLETON_PK)
        state.staged = max(state.staged, state.version) + 1
        state.attempted_at = timezone.now()
        state.save(update_fields=["staged", "attempted_at"])
        return state.staged


def _download(url: str, into: IO[bytes]) -> None:
    """``url``'s body into ``into``, as sent (the parser inflates a gzip guide, bounded);
    GuideRefreshError past the size cap or the deadline, or from an address not fetched."""
    try:
        url_download(
            url=url,
            into=into,
            max_bytes=_max_bytes(),
            timeout=settings.CHANNELS_GUIDE_TIMEOUT_SEC,
            decode=False,
        )
    except DownloadError as error:
        raise GuideRefreshError(str(error)) from None


class _Staging:
    """Writes one refresh's rows under its version, in batches, within the bounds."""

    def __init__(self, version: int, *, now: object) -> None:
        self.version = version
        self.kept_after = now - timedelta(hours=settings.CHANNELS_GUIDE_KEEP_PAST_HOURS)
        self.owners: dict[str, int] = {}  # channel ID -> the source it belongs to
        self.with_row: set[str] = set()  # channel IDs that have their GuideChannel row
        self.channels = self.programmes = self.left_out = 0
        self._adapt = connection.ops.adapt_datetimefield_value

    def source_add(self, index: int, records: Iterable) -> None:
        programmes: list[tuple] = []
        channels: list[ParsedChannel] = []
        for record in records:
            if isinstance(record, ParsedChannel):
                if self._owned(record.id, index) and record.id not in self.with_row:
                    channels.append(record)
                    if len(channels) >= BATCH_ROWS:
                        self._channels_write(channels)
                continue
            if record.stop < self.kept_after or not self._owned(record.channel, index):
                continue
            if self.programmes >= settings.CHANNELS_GUIDE_MAX_PROGRAMMES:
                self.left_out += 1
                continue
            self.programmes += 1
            programmes.append(
                (
                    self.version,
                    record.channel,
                    self._adapt(record.start),
                    self._adapt(record.stop),
                    record.title,
                    record.subtitle,
                    record.desc,
                )
            )
            if len(programmes) >= BATCH_ROWS:
                self._programmes_write(programmes)
        self._channels_write(channels)
        self._programmes_write(programmes)
        # Programmes under an ID the guide lists no <channel> for still match a tvg-id.
        bare = [ParsedChannel(id_, ()) for id_, owner in self.owners.items() if owner == index]
        self._channels_write([channel for channel in bare if channel.id not in self.with_row])

    def _owned(self, channel_id: str, index: int) -> bool:
        """Whether ``channel_id`` belongs to source ``index`` (it does if no source before it
        listed it, and the bound on channels leaves it room)."""
        owner = self.owners.get(channel_id)
        if owner is None:
            if len(self.owners) >= settings.CHANNELS_GUIDE_MAX_CHANNELS:
                self.left_out += 1
                return False
            self.owners[channel_id] = owner = index
        return owner == index

    def _channels_write(self, channels: list[ParsedChannel]) -> None:
        if not channels:
            return
        rows, names = [], []
        for channel in channels:
            self.with_row.add(channel.id)
            rows.append(
                (self.version, channel.id, channel.names[0] if channel.names else "", channel.icon)
            )
            keys = dict.fromkeys(name.casefold()[:300] for name in channel.names)
            names += [(self.version, key, channel.id) for key in list(keys)[:NAMES_PER_CHANNEL]]
        self.channels += len(rows)
        with transaction.atomic():
            _rows_insert(GuideChannel, ("version", "xmltv_id", "display_name", "icon"), rows)
            _rows_insert(GuideChannelName, ("version", "key", "xmltv_id"), names)
        channels.clear()

    def _programmes_write(self, rows: list[tuple]) -> None:
        if rows:
            with transaction.atomic():
                _rows_insert(Programme, PROGRAMME_FIELDS, rows)
            rows.clear()

    def finish(self) -> GuideRefreshResult:
        return GuideRefreshResult(self.version, self.channels, self.programmes, self.left_out)


PROGRAMME_FIELDS = ("version", "channel", "start", "stop", "title", "subtitle", "desc")


def _rows_insert(model: type, fields: tuple[str, ...], rows: list[tuple]) -> None:
    """One prepared INSERT for every row: bulk_create builds its SQL afresh per batch, several
    times slower for the 800,000 programmes of a large guide."""
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(
        connection.ops.quote_name(model._meta.get_field(name).column) for name in fields
    )
    parameters = ", ".join(["%s"] * len(fields))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({parameters})", rows)  # noqa: S608


def _swap(result: GuideRefreshResult, sources: list[str]) -> None:
    """Show the staged guide, then delete every other version's rows (the old guide's, and
    any left by a refresh that died midway)."""
    now = timezone.now()
    with transaction.atomic():
        state = GuideState.objects.select_for_update().get(pk=GuideState.SINGLETON_PK)
        state.version = result.version
        state.sources = sources
        state.refreshed_at = now
        state.channels, state.programmes = result.channels, result.programmes
        state.left_out = result.left_out
        state.last_error, state.last_error_at = "", None
        state.save()
    for model in (Programme, GuideChannelName, GuideChannel):
        model.objects.exclude(version=result.version).delete()


def _staged_delete(version: int) -> None:
    for model in (Programme, GuideChannelName, GuideChannel):
        model.objects.filter(version=version).delete()


def _failure_record(detail: str) -> None:
    now = timezone.now()
    GuideState.objects.filter(pk=GuideState.SINGLETON_PK).update(
        last_error=detail[:2000], last_error_at=now, attempted_at=now
    )
