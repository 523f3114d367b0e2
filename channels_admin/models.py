"""The playlist, its channels, the backups added to them by hand, and the state of the shared
stream."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from channels_admin.streaming.sources import Upstream, source_label


class Playlist(models.Model):
    """The M3U playlist the channels come from.

    One playlist is served (the ``default`` row). Its source is the settings
    ``CHANNELS_PLAYLIST_PATH`` / ``CHANNELS_PLAYLIST_URL`` unless overridden here in the admin.
    """

    DEFAULT_NAME = "default"

    name = models.CharField(max_length=100, unique=True, default=DEFAULT_NAME)
    source_path = models.CharField(
        max_length=1000,
        blank=True,
        help_text="M3U file on the server. Blank: the CHANNELS_PLAYLIST_PATH setting.",
    )
    source_url = models.URLField(
        max_length=2000,
        blank=True,
        help_text="Download the playlist from here into the file first. Blank: the "
        "CHANNELS_PLAYLIST_URL setting (if any).",
    )
    version = models.PositiveIntegerField(default=0, editable=False)
    epg_urls = models.JSONField(default=list, blank=True, editable=False)
    loaded_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    last_error_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return self.name

    @property
    def effective_path(self) -> Path:
        configured = self.source_path or settings.CHANNELS_PLAYLIST_PATH
        return Path(configured) if configured else settings.CHANNELS_DEFAULT_PLAYLIST_PATH

    @property
    def effective_url(self) -> str:
        return self.source_url or settings.CHANNELS_PLAYLIST_URL


class ChannelQuerySet(models.QuerySet):
    def of_default_playlist(self) -> ChannelQuerySet:
        """The channels of the one playlist served (``Playlist.DEFAULT_NAME``)."""
        return self.filter(playlist__name=Playlist.DEFAULT_NAME)


class Channel(models.Model):
    """One entry of the playlist, in playlist order (``position``)."""

    # No index: there is one playlist, so an index on it selects nothing, and with one SQLite
    # would walk the table in index order instead of reading it straight through.
    playlist = models.ForeignKey(
        Playlist, on_delete=models.CASCADE, related_name="channels", db_index=False
    )
    position = models.PositiveIntegerField()
    channel_id = models.CharField(max_length=300)
    name = models.CharField(max_length=500)
    stream_url = models.CharField(max_length=4000)
    group = models.CharField(max_length=300, blank=True)
    logo = models.CharField(max_length=2000, blank=True)
    tvg_id = models.CharField(max_length=300, blank=True)
    tvg_name = models.CharField(max_length=500, blank=True)
    chno = models.CharField(max_length=50, blank=True)
    user_agent = models.CharField(max_length=1000, blank=True)
    referrer = models.CharField(max_length=2000, blank=True)
    http_headers = models.JSONField(
        default=dict, blank=True, help_text="Headers the entry's #EXTHTTP line asks for."
    )
    attrs = models.JSONField(
        default=dict, blank=True, help_text="The entry's other #EXTINF attributes."
    )
    # Unicode-casefolded copies for the case-insensitive search and group filter. The name
    # and the ID share one column (joined by a newline) so a search is one LIKE per row.
    search_text = models.CharField(max_length=801, editable=False)
    search_group = models.CharField(max_length=300, blank=True, editable=False)

    objects = ChannelQuerySet.as_manager()

    class Meta:
        ordering = ["playlist", "position"]
        constraints = [
            # The ID first: it finds a channel by ID, and is no use for a scan of the playlist.
            models.UniqueConstraint(fields=["channel_id", "playlist"], name="unique_channel_id"),
        ]
        indexes = [
            # A channel's other sources are the entries with its tvg-id: without this, finding
            # them reads the whole playlist (100,000 rows) at every switch.
            models.Index(fields=["tvg_id", "playlist"], name="channel_tvg_id"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def source_key(self) -> str:
        """What the channel's backups added by hand are filed under: its ``tvg-id``, which
        every stream of one channel shares, or for an entry without one its channel ID."""
        return self.tvg_id or self.channel_id

    @property
    def upstream_headers(self) -> dict[str, str]:
        """HTTP headers the provider expects, from the entry's #EXTHTTP and #EXTVLCOPT lines
        (the latter win), named in their usual case."""
        headers = {_header_case(name): value for name, value in self.http_headers.items()}
        if self.user_agent:
            headers["User-Agent"] = self.user_agent
        if self.referrer:
            headers["Referer"] = self.referrer
        return headers


class BackupSourceQuerySet(models.QuerySet):
    def with_listed(self) -> BackupSourceQuerySet:
        """Each backup with ``listed``: whether an entry of its playlist has its key (a tvg-id,
        or the channel ID of an entry without one); one that is not listed is orphaned."""
        channels = Channel.objects.filter(playlist=models.OuterRef("playlist"))
        return self.annotate(
            listed=models.Exists(channels.filter(tvg_id=models.OuterRef("channel_key")))
            | models.Exists(channels.filter(tvg_id="", channel_id=models.OuterRef("channel_key")))
        )


class BackupSource(models.Model):
    """A stream added by hand as a backup of a playlist channel.

    It belongs to the channel's :attr:`Channel.source_key` rather than to a channel row, since a
    reload replaces every row: it outlives reloads, and while no entry of the playlist has its
    key it is kept but unused (the admin shows it as orphaned) until the key comes back.
    """

    # Found by their key (the index below), never by the playlist alone: no index of its own.
    playlist = models.ForeignKey(
        Playlist, on_delete=models.CASCADE, related_name="backups", db_index=False
    )
    channel_key = models.CharField(
        "channel key",
        max_length=300,
        help_text="The channel's tvg-id; for an entry without one, its channel ID.",
    )
    position = models.PositiveIntegerField(
        default=0, help_text="Backups by hand are tried in this order, after the playlist's."
    )
    url = models.CharField("URL", max_length=4000, help_text="An http:// or https:// stream.")
    headers = models.JSONField(
        default=dict,
        blank=True,
        help_text='HTTP headers sent with it, as a JSON object: {"Referer": "https://..."}.',
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = BackupSourceQuerySet.as_manager()

    class Meta:
        ordering = ["playlist", "channel_key", "position", "id"]
        indexes = [models.Index(fields=["channel_key", "playlist"], name="backup_channel_key")]

    def __str__(self) -> str:
        return f"{self.channel_key}: {self.url}"

    def clean(self) -> None:
        errors = {}
        if not url_relayable(self.url):
            errors["url"] = "The URL must start with http:// or https:// and name a host."
        if not headers_valid(self.headers):
            errors["headers"] = (
                'Headers must be a JSON object of header names to text values, e.g. {"Referer": '
                '"https://example.org/"}: each name a header name, each value one line of text.'
            )
        if errors:
            raise ValidationError(errors)


# A scheme the hub relays, then a host: "http://" alone is no stream.
_RELAYABLE_URL = re.compile(r"https?://[^\s/?#]+\S*", re.IGNORECASE)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110's token
_HEADER_BREAK = re.compile(r"[\r\n\x00]")


def url_relayable(url: str) -> bool:
    """Whether the hub can relay ``url``: http or https, with a host."""
    return _RELAYABLE_URL.fullmatch(url) is not None


def headers_valid(headers: object) -> bool:
    """Whether ``headers`` is a mapping of header names to values that fit in one header line."""
    return isinstance(headers, dict) and all(
        isinstance(name, str)
        and _HEADER_NAME.fullmatch(name)
        and isinstance(value, str)
        and not _HEADER_BREAK.search(value)
        for name, value in headers.items()
    )


def _header_case(name: str) -> str:
    """``user-agent`` as ``User-Agent``: one spelling, so that no header is sent twice."""
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


class StreamState(models.Model):
    """The one active channel and how its stream is doing (a single row, pk 1).

    Kept in the database so every server process answers the admin API alike and a restart
    resumes the channel.
    """

    SINGLETON_PK = 1

    channel_id = models.CharField(max_length=300, blank=True)
    channel_name = models.CharField(max_length=500, blank=True)
    current_stream_url = models.CharField(max_length=4000, blank=True)
    upstream_headers = models.JSONField(default=dict, blank=True)
    live = models.BooleanField(default=False)
    transitioning = models.BooleanField(default=False)
    upstream_down = models.BooleanField(default=False)
    upstream_detail = models.CharField(
        max_length=500, blank=True, help_text="Why the upstream is down, while it is."
    )
    upstream_info = models.CharField(
        max_length=500,
        blank=True,
        help_text="What the upstream plays, while it flows (e.g. HLS 1280x720, 3.1 Mbit/s).",
    )
    switch_started_at = models.DateTimeField(null=True, blank=True)
    sources = models.JSONField(
        default=list,
        blank=True,
        help_text="The channel's sources, the primary first: [{url, headers}].",
    )
    source_index = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Which of the sources plays now (0: the primary)."
    )
    failovers = models.PositiveIntegerField(
        default=0,
        help_text="Times another source took over from one that failed, since the switch.",
    )
    last_failure = models.CharField(max_length=500, blank=True)
    last_failure_source = models.CharField(max_length=50, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    switch_message = models.CharField(
        max_length=500, blank=True, help_text="How the last switch went, in a sentence."
    )
    switch_returned = models.BooleanField(
        default=False,
        help_text="The switch went back to the channel before: the one chosen showed no picture.",
    )
    stream_serial = models.PositiveIntegerField(
        default=0,
        help_text="Counts the changes of the viewers' stream that did not end it (the slate, "
        "another source, another codec or picture size): a player starts afresh at each.",
    )
    stream_format = models.CharField(
        max_length=100,
        blank=True,
        help_text="What the last change of stream brought (e.g. H.264 Main 640x360, AAC).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "stream state"
        verbose_name_plural = "stream state"

    def __str__(self) -> str:
        return self.channel_name or "no channel"

    @classmethod
    def load(cls) -> StreamState:
        """The row; an unsaved one with the defaults while no channel was ever selected."""
        return cls.objects.filter(pk=cls.SINGLETON_PK).first() or cls()

    @property
    def source_list(self) -> list[dict]:
        """The sources as recorded; a row from before sources were kept has its one URL."""
        if self.sources:
            return self.sources
        if self.current_stream_url:
            return [{"url": self.current_stream_url, "headers": self.upstream_headers}]
        return []

    @property
    def upstreams(self) -> list[Upstream]:
        """The sources as the hub takes them."""
        return [Upstream.from_record(record) for record in self.source_list]

    @property
    def source_label(self) -> str:
        """Which source plays (``primary``, ``backup 2 of 3``); "" while none does."""
        if self.source_index is None or not self.live:
            return ""
        return source_label(self.source_index, len(self.source_list))

    @property
    def generation(self) -> str:
        """What names the current switch in every process: when it was made, as recorded."""
        return self.switch_started_at.isoformat() if self.switch_started_at else ""
