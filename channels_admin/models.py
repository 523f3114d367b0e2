"""The playlist, its channels, the backups added to them by hand, the state of the shared
stream, the private links viewers watch it through while it is private, and the schedule
(its entries and the switches it made)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from channels_admin.schedule_times import Action, EntryRules
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


class StillChannel(models.Model):
    """A channel whose picture is legitimately still (a radio's card, a slideshow of long
    slides): the hub does not judge its sources' pictures frozen or black
    (``streaming/picture_watch.py``), nor their sound silent (``streaming/audio_watch.py``).

    Filed under the channel's :attr:`Channel.source_key`, as :class:`BackupSource` is, since a
    reload replaces every channel row: the exclusion outlives reloads."""

    playlist = models.ForeignKey(
        Playlist, on_delete=models.CASCADE, related_name="still_channels", db_index=False
    )
    channel_key = models.CharField(
        "channel key",
        max_length=300,
        help_text="The channel's tvg-id; for an entry without one, its channel ID.",
    )
    note = models.CharField(max_length=500, blank=True, help_text="Why its picture is still.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["playlist", "channel_key"]
        constraints = [
            models.UniqueConstraint(fields=["channel_key", "playlist"], name="unique_still_key"),
        ]

    def __str__(self) -> str:
        return self.channel_key


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
    private = models.BooleanField(
        default=False,
        help_text="Viewers need a private link (a viewer link's URL) to watch /ts, /hls/ and /tv/.",
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


class GuideState(models.Model):
    """The programme guide's one state row (pk 1): which stored guide is shown, and how the
    last refresh went.

    A refresh writes its rows under a new ``version`` beside the shown guide's, and only once
    every source parsed does it make that version the shown one (and delete the old rows): a
    guide that fails to fetch or parse leaves the last good one shown, and its reason here.
    """

    SINGLETON_PK = 1

    version = models.PositiveIntegerField(default=0, help_text="The guide shown (0: none yet).")
    staged = models.PositiveIntegerField(default=0, help_text="The last version given out.")
    sources = models.JSONField(default=list, blank=True)
    refreshed_at = models.DateTimeField(null=True, blank=True)
    attempted_at = models.DateTimeField(null=True, blank=True)
    channels = models.PositiveIntegerField(default=0)
    programmes = models.PositiveIntegerField(default=0)
    left_out = models.PositiveIntegerField(
        default=0, help_text="Programmes and channels past the bounds, not kept."
    )
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "guide state"
        verbose_name_plural = "guide state"

    def __str__(self) -> str:
        return f"guide version {self.version}"

    @classmethod
    def load(cls) -> GuideState:
        """The row; an unsaved one with the defaults before any refresh."""
        return cls.objects.filter(pk=cls.SINGLETON_PK).first() or cls(pk=cls.SINGLETON_PK)


class GuideChannel(models.Model):
    """A ``<channel>`` of the guide: its ID (what a playlist's ``tvg-id`` names), its first
    display name, and its icon."""

    version = models.PositiveIntegerField()
    xmltv_id = models.CharField(max_length=300)
    display_name = models.CharField(max_length=300, blank=True)
    icon = models.CharField(max_length=2000, blank=True)

    class Meta:
        indexes = [models.Index(fields=["xmltv_id", "version"], name="guide_channel_id")]

    def __str__(self) -> str:
        return self.display_name or self.xmltv_id


class GuideChannelName(models.Model):
    """One display name of a guide channel, casefolded: a playlist entry whose ``tvg-id`` the
    guide does not know is matched by its name."""

    version = models.PositiveIntegerField()
    key = models.CharField(max_length=300)
    xmltv_id = models.CharField(max_length=300)

    class Meta:
        indexes = [models.Index(fields=["key", "version"], name="guide_channel_name")]

    def __str__(self) -> str:
        return f"{self.key} -> {self.xmltv_id}"


class Programme(models.Model):
    """One programme of the guide, under its guide channel's ID."""

    version = models.PositiveIntegerField()
    channel = models.CharField(max_length=300)
    start = models.DateTimeField()
    stop = models.DateTimeField()
    title = models.CharField(max_length=300)
    subtitle = models.CharField(max_length=300, blank=True)
    desc = models.TextField(blank=True)

    class Meta:
        indexes = [
            # A channel's programme on now and the next: the first two that stop after now.
            models.Index(fields=["channel", "version", "stop"], name="programme_channel_stop")
        ]

    def __str__(self) -> str:
        return f"{self.channel}: {self.title}"


class ViewerLink(models.Model):
    """A private link to the stream: its URL carries a token (``/tv/?t=TOKEN``) that admits
    viewers while the stream is private, until the link expires or is revoked.

    Only a hash of the token is kept (SHA-256: the token is 32 random bytes, so no slow hash is
    needed), so the database never holds a working link; the token is shown once, when the
    link is made (``services/viewer_links.py``)."""

    name = models.CharField(max_length=100, help_text="Who or what the link is for.")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Blank: the link never expires (it can be revoked)."
    )
    max_viewers = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="How many viewers may watch through the link at once. Blank: no cap.",
    )
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    def admits_at(self, now: datetime) -> bool:
        """Whether the link lets viewers in at ``now``: not revoked, not expired."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    @property
    def active(self) -> bool:
        return self.admits_at(timezone.now())


class ScheduleEntry(models.Model):
    """A switch the server makes by itself: at a time on chosen weekdays (weekly), or once.

    Optionally it has an end (``until``, ``until_time``): its slot lasts until then, and with
    ``then_return`` the server goes back at the end to the channel that played before it (a
    programme of the guide is such an entry, ``programme_title`` its title). ``missed`` says
    what happens to a switch the server was down for. Only occurrences after ``edited_at``
    count, so that an entry created or changed at 10:05 for 10:00 does not fire at once.
    """

    class Kind(models.TextChoices):
        WEEKLY = "weekly", "weekly"
        ONCE = "once", "once"

    class Missed(models.TextChoices):
        TAKE_UP = "take_up", "take it up while its slot lasts"
        SKIP = "skip", "skip it"

    name = models.CharField(max_length=200, blank=True)
    channel_id = models.CharField(
        "channel ID", max_length=300, help_text="The playlist's channel to switch to."
    )
    enabled = models.BooleanField(default=True)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.WEEKLY)
    at = models.DateTimeField(null=True, blank=True, help_text="One-off entry: when.")
    until = models.DateTimeField(
        null=True, blank=True, help_text="One-off entry: when its slot ends (optional)."
    )
    time_of_day = models.TimeField(
        null=True, blank=True, help_text="Weekly entry: the time, in the schedule's time zone."
    )
    until_time = models.TimeField(
        null=True,
        blank=True,
        help_text="Weekly entry: when its slot ends (optional); earlier than the time: the "
        "next day.",
    )
    weekdays = models.JSONField(
        default=list, blank=True, help_text="Weekly entry: the days, 0 = Monday … 6 = Sunday."
    )
    then_return = models.BooleanField(
        default=False,
        help_text="At the end, go back to the channel that played before (needs an end).",
    )
    programme_title = models.CharField(
        max_length=500, blank=True, help_text="The guide's programme this entry plays, if any."
    )
    missed = models.CharField(
        max_length=10,
        choices=Missed.choices,
        default=Missed.TAKE_UP,
        help_text="A switch missed while the server was down.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    edited_at = models.DateTimeField(editable=False)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "schedule entries"

    def __str__(self) -> str:
        return self.name or self.programme_title or f"{self.kind} entry {self.pk}"

    @property
    def rules(self) -> EntryRules:
        """What the entry says of its times, for ``schedule_times``."""
        return EntryRules(
            weekly=self.kind == self.Kind.WEEKLY,
            at=self.at,
            until=self.until,
            time_of_day=self.time_of_day,
            until_time=self.until_time,
            weekdays=tuple(self.weekdays or ()),
            then_return=self.then_return,
        )

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.kind == self.Kind.ONCE:
            if self.at is None:
                errors["at"] = "A one-off entry needs its time."
            elif self.until is not None and self.until <= self.at:
                errors["until"] = "The end must come after the start."
        else:
            if self.time_of_day is None:
                errors["time_of_day"] = "A weekly entry needs its time of day."
            if not weekdays_valid(self.weekdays):
                errors["weekdays"] = (
                    "Give the days as a list of numbers from 0 (Monday) to 6 (Sunday), each "
                    "once, at least one."
                )
            if self.until_time is not None and self.until_time == self.time_of_day:
                errors["until_time"] = "The end must differ from the start."
        has_end = self.until if self.kind == self.Kind.ONCE else self.until_time
        if self.then_return and has_end is None:
            errors["then_return"] = "Going back needs an end."
        if errors:
            raise ValidationError(errors)


def weekdays_valid(weekdays: object) -> bool:
    """Whether ``weekdays`` is a list of distinct day numbers, 0 (Monday) to 6, at least one."""
    return (
        isinstance(weekdays, list)
        and 0 < len(weekdays) == len(set(weekdays))
        and all(type(day) is int and 0 <= day <= 6 for day in weekdays)
    )


class ScheduleRun(models.Model):
    """A switch of the schedule, made or not: one row per entry, time and action, which is
    what keeps a switch to once across restarts and processes (the unique constraint: the
    first process to insert the row makes the switch)."""

    class Outcome(models.TextChoices):
        RUNNING = "running"  # claimed; the switch is being made
        SWITCHED = "switched"
        TAKEN_UP = "taken up"  # missed while the server was down, made late
        UNCHANGED = "unchanged"  # the channel already played, or nothing to go back to
        SKIPPED = "skipped"
        FAILED = "failed"

    entry = models.ForeignKey(ScheduleEntry, on_delete=models.CASCADE, related_name="runs")
    due_at = models.DateTimeField()
    action = models.CharField(max_length=10, choices=[(a.value, a.value) for a in Action])
    slot_start = models.DateTimeField(help_text="The start of the slot (a return's own start).")
    claimed_at = models.DateTimeField()
    switched_at = models.DateTimeField(
        null=True, blank=True, help_text="When the switch was made (it names the switch)."
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    detail = models.CharField(max_length=500, blank=True)
    channel_id = models.CharField(max_length=300, blank=True)
    channel_name = models.CharField(max_length=500, blank=True)
    previous_channel_id = models.CharField(
        max_length=300, blank=True, help_text="What played before a start: where its end goes."
    )
    generation = models.CharField(
        max_length=64, blank=True, help_text="The switch it made (StreamState.generation)."
    )

    class Meta:
        ordering = ["-due_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["entry", "due_at", "action"], name="unique_schedule_run"
            )
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} {self.action} {self.due_at:%Y-%m-%d %H:%M:%S}: {self.outcome}"

    @property
    def lateness(self) -> float | None:
        """Seconds from the time due to the switch, for a switch made."""
        if self.switched_at is None:
            return None
        return (self.switched_at - self.due_at).total_seconds()
