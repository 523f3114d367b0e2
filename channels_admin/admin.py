"""Django admin for the playlist (with its read-only channel list), the channels (with their
sources in order), the backups added to them by hand, the still channels whose picture the
hub does not judge, the private viewer links, and the schedule (its entries, and the record
of its switches)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from channels_admin.errors import BadRequest, PlaylistReloadError
from channels_admin.models import (
    BackupSource,
    Channel,
    Playlist,
    ScheduleEntry,
    ScheduleRun,
    StillChannel,
    StreamState,
    ViewerLink,
)
from channels_admin.schedule_form import ScheduleEntryForm
from channels_admin.schedule_times import weekdays_text
from channels_admin.selectors import backup_key_listed, channel_source_rows, channel_still
from channels_admin.services.playlists import playlist_get_or_create, playlist_reload
from channels_admin.services.schedule import schedule_entry_saved, schedule_wake_sync
from channels_admin.services.viewer_links import (
    viewer_link_create,
    viewer_link_fields_check,
    viewer_link_revoke,
)

CHANNEL_FIELDS = ("position", "channel_id", "name", "group", "stream_url", "logo", "chno")
CHANNEL_PREVIEW = 50


@admin.register(Playlist)
class PlaylistAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "channel_count", "loaded_at", "last_error")
    readonly_fields = (
        "version",
        "loaded_at",
        "epg_urls",
        "last_error",
        "last_error_at",
        "channel_list",
    )
    fields = ("name", "source_path", "source_url", *readonly_fields)
    actions = ["reload_now"]
    # A URL typed without a scheme means https (Django 6's default).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @admin.display(description="channels")
    def channel_count(self, playlist: Playlist) -> int:
        return playlist.channels.count()

    @admin.display(description="channels (read-only; they come from the playlist file)")
    def channel_list(self, playlist: Playlist) -> str:
        # A table of the first rows and a link to all: a playlist may hold 100,000 channels.
        rows = playlist.channels.order_by("position")[:CHANNEL_PREVIEW]
        url = (
            reverse("admin:channels_admin_channel_changelist")
            + f"?playlist__id__exact={playlist.pk}"
        )
        table = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((c.position, c.channel_id, c.name, c.group) for c in rows),
        )
        return format_html(
            "<table><tr><th>#</th><th>ID</th><th>name</th><th>group</th></tr>{}</table>"
            '<p><a href="{}">All {} channels</a></p>',
            table,
            url,
            playlist.channels.count(),
        )

    @admin.action(description="Reload now")
    def reload_now(self, request: HttpRequest, queryset: QuerySet[Playlist]) -> None:
        for playlist in queryset:
            try:
                result = playlist_reload(playlist=playlist)
            except PlaylistReloadError as error:
                self.message_user(
                    request, f"{playlist}: failed to reload playlist: {error}", messages.ERROR
                )
            else:
                self.message_user(
                    request, f"{playlist}: {result.channels} channels, version {result.version}"
                )


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ("name", "channel_id", "group", "chno", "stream_url")
    list_filter = ("group", "playlist")
    search_fields = ("name", "channel_id", "stream_url", "tvg_id")
    readonly_fields = (
        *CHANNEL_FIELDS,
        "playlist",
        "tvg_id",
        "user_agent",
        "referrer",
        "http_headers",
        "attrs",
        "sources",
        "picture_checks",
    )
    fields = readonly_fields
    ordering = ("position",)
    list_per_page = 100
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Channel | None = None) -> bool:
        return False

    @admin.display(description="sources (in the order they are tried)")
    def sources(self, channel: Channel) -> str:
        rows = channel_source_rows(channel=channel)
        table = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    number,
                    _source_origin(row.origin, row.backup),
                    row.upstream.url,
                    json.dumps(dict(row.upstream.headers), ensure_ascii=False),
                )
                for number, row in enumerate(rows, start=1)
            ),
        )
        add_url = (
            reverse("admin:channels_admin_backupsource_add")
            + "?"
            + urlencode({"playlist": channel.playlist_id, "channel_key": channel.source_key})
        )
        return format_html(
            "<table><tr><th>#</th><th>source</th><th>URL</th><th>headers</th></tr>{}</table>"
            '<p><a href="{}">Add a backup by hand</a> (channel key {})</p>',
            table,
            add_url,
            channel.source_key,
        )

    @admin.display(description="picture checks")
    def picture_checks(self, channel: Channel) -> str:
        if channel_still(channel=channel):
            url = (
                reverse("admin:channels_admin_stillchannel_changelist")
                + "?"
                + urlencode({"channel_key": channel.source_key})
            )
            return format_html('off: <a href="{}">a still channel</a>', url)
        add_url = (
            reverse("admin:channels_admin_stillchannel_add")
            + "?"
            + urlencode({"playlist": channel.playlist_id, "channel_key": channel.source_key})
        )
        return format_html(
            'on (a frozen or black picture fails a source over). <a href="{}">Its picture is '
            "still by design: turn them off</a>",
            add_url,
        )


_ORIGINS = {"primary": "primary", "playlist": "backup from the playlist"}


def _source_origin(origin: str, backup: BackupSource | None) -> str:
    if backup is None:
        return _ORIGINS[origin]
    url = reverse("admin:channels_admin_backupsource_change", args=[backup.pk])
    return format_html('<a href="{}">backup by hand</a>', url)


class BackupSourceForm(forms.ModelForm):
    class Meta:
        model = BackupSource
        fields = ("playlist", "channel_key", "position", "url", "headers")

    def clean_channel_key(self) -> str:
        key = self.cleaned_data["channel_key"].strip()
        playlist = self.cleaned_data.get("playlist")
        # A backup may outlive its channel (orphaned), but a new key must name a channel now:
        # a typo would otherwise never play. (The instance still holds the saved values.)
        if playlist is None:
            return key
        saved = (self.instance.channel_key, self.instance.playlist_id)
        if saved != (key, playlist.pk) and not backup_key_listed(
            playlist_id=playlist.pk, channel_key=key
        ):
            raise forms.ValidationError(
                f"No channel of {playlist} has the key {key!r} (its tvg-id or, for an entry "
                "without one, its channel ID). Open the channel in Channels and follow “Add a "
                "backup by hand”."
            )
        return key


class ListedFilter(admin.SimpleListFilter):
    title = "in the playlist"
    parameter_name = "listed"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return [("yes", "yes"), ("no", "no (orphaned)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("yes", "no"):
            return queryset.filter(listed=self.value() == "yes")
        return queryset


@admin.register(BackupSource)
class BackupSourceAdmin(admin.ModelAdmin):
    form = BackupSourceForm
    list_display = ("channel_key", "position", "url", "listed", "created_at")
    list_filter = (ListedFilter, "playlist")
    search_fields = ("channel_key", "url")
    fields = ("playlist", "channel_key", "position", "url", "headers", "channels", "created_at")
    readonly_fields = ("channels", "created_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[BackupSource]:
        return super().get_queryset(request).with_listed()

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = super().get_changeform_initial_data(request)
        initial.setdefault("playlist", playlist_get_or_create().pk)
        return initial

    @admin.display(description="in the playlist", boolean=True)
    def listed(self, backup: BackupSource) -> bool:
        return backup.listed

    @admin.display(description="channels with this key")
    def channels(self, backup: BackupSource) -> str:
        if backup.pk is None:
            return "-"
        channels = Channel.objects.filter(playlist_id=backup.playlist_id).filter(
            models.Q(tvg_id=backup.channel_key) | models.Q(tvg_id="", channel_id=backup.channel_key)
        )
        links = format_html_join(
            ", ",
            '<a href="{}">{}</a>',
            (
                (reverse("admin:channels_admin_channel_change", args=[c.pk]), c.name)
                for c in channels.order_by("position").only("name")[:CHANNEL_PREVIEW]
            ),
        )
        return links or "none: orphaned (kept, unused until the key is in the playlist again)"


class StillChannelForm(forms.ModelForm):
    class Meta:
        model = StillChannel
        fields = ("playlist", "channel_key", "note")

    def clean_channel_key(self) -> str:
        key = self.cleaned_data["channel_key"].strip()
        playlist = self.cleaned_data.get("playlist")
        saved = (self.instance.channel_key, self.instance.playlist_id)
        if (
            playlist is not None
            and saved != (key, playlist.pk)
            and not backup_key_listed(playlist_id=playlist.pk, channel_key=key)
        ):
            raise forms.ValidationError(
                f"No channel of {playlist} has the key {key!r} (its tvg-id or, for an entry "
                "without one, its channel ID)."
            )
        return key


@admin.register(StillChannel)
class StillChannelAdmin(admin.ModelAdmin):
    """Channels whose picture is still by design: their sources are never failed over for a
    frozen or black picture, nor for silent sound."""

    form = StillChannelForm
    list_display = ("channel_key", "note", "created_at")
    list_filter = ("playlist",)
    search_fields = ("channel_key", "note")
    fields = ("playlist", "channel_key", "note", "created_at")
    readonly_fields = ("created_at",)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = super().get_changeform_initial_data(request)
        initial.setdefault("playlist", playlist_get_or_create().pk)
        return initial


@admin.register(StreamState)
class StreamStateAdmin(admin.ModelAdmin):
    list_display = ("channel_name", "live", "transitioning", "upstream_down", "switch_started_at")
    readonly_fields = [field.name for field in StreamState._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class ViewerLinkForm(forms.ModelForm):
    class Meta:
        model = ViewerLink
        fields = ("name", "expires_at", "max_viewers")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.instance.pk is None:
            try:
                viewer_link_fields_check(
                    name=(data.get("name") or "").strip(),
                    expires_at=data.get("expires_at"),
                    max_viewers=data.get("max_viewers"),
                )
            except BadRequest as error:
                raise forms.ValidationError(error.text) from None
        return data


@admin.register(ViewerLink)
class ViewerLinkAdmin(admin.ModelAdmin):
    """Links are made here or on the admin page (the URL is shown once, as only its token's
    hash is kept) and revoked with the action; a link once made is not edited."""

    form = ViewerLinkForm
    list_display = ("name", "created_at", "expires_at", "max_viewers", "revoked_at", "active")
    fields = ("name", "expires_at", "max_viewers", "created_at", "revoked_at")
    readonly_fields = ("created_at", "revoked_at")
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: ViewerLink | None = None) -> tuple:
        if obj is not None:
            return self.fields
        return self.readonly_fields

    @admin.display(description="admits viewers", boolean=True)
    def active(self, link: ViewerLink) -> bool:
        return link.active

    def save_model(self, request: HttpRequest, obj: ViewerLink, form: Any, change: bool) -> None:
        if change:
            return  # nothing is editable
        created = viewer_link_create(
            name=obj.name, expires_at=obj.expires_at, max_viewers=obj.max_viewers
        )
        obj.pk, obj.token_hash, obj.created_at = (
            created.link.pk,
            created.link.token_hash,
            created.link.created_at,
        )
        self.message_user(
            request,
            format_html(
                "The link's URL, shown this once (only its hash is kept): <code>{}</code>",
                request.build_absolute_uri(created.path),
            ),
            messages.SUCCESS,
        )

    @admin.action(description="Revoke the selected links (their viewers are cut off)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ViewerLink]) -> None:
        for link in queryset.filter(revoked_at__isnull=True):
            viewer_link_revoke(link_id=link.pk)
        self.message_user(request, "Revoked.", messages.SUCCESS)


@admin.register(ScheduleEntry)
class ScheduleEntryAdmin(admin.ModelAdmin):
    """The schedule's entries, with the form of the admin API (``schedule_form.py``)."""

    form = ScheduleEntryForm
    list_display = ("__str__", "channel_id", "kind", "when", "enabled", "missed")
    list_filter = ("enabled", "kind")
    readonly_fields = ("created_at", "edited_at")

    @admin.display(description="when")
    def when(self, entry: ScheduleEntry) -> str:
        if entry.kind == ScheduleEntry.Kind.ONCE:
            return f"{entry.at:%Y-%m-%d %H:%M:%S %Z}" if entry.at else ""
        return f"{weekdays_text(entry.weekdays)} {entry.time_of_day}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        full = ScheduleEntry.objects.count() >= settings.CHANNELS_SCHEDULE_MAX_ENTRIES
        return not full and super().has_add_permission(request)

    def save_model(self, request: HttpRequest, obj: ScheduleEntry, form: Any, change: bool) -> None:
        schedule_entry_saved(entry=obj)
        super().save_model(request, obj, form, change)
        schedule_wake_sync()

    def delete_model(self, request: HttpRequest, obj: ScheduleEntry) -> None:
        super().delete_model(request, obj)
        schedule_wake_sync()


@admin.register(ScheduleRun)
class ScheduleRunAdmin(admin.ModelAdmin):
    """The schedule's switches, made or skipped: a record, read-only."""

    list_display = ("entry", "action", "due_at", "switched_at", "lateness", "outcome", "detail")
    list_filter = ("outcome", "action")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ScheduleRun | None = None) -> bool:
        return False
