"""Django admin for the playlist (with its read-only channel list) and the channels."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from channels_admin.errors import PlaylistReloadError
from channels_admin.models import Channel, Playlist, StreamState
from channels_admin.services.playlists import playlist_reload

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
    )
    fields = readonly_fields
    ordering = ("position",)
    list_per_page = 100
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Channel | None = None) -> bool:
        return False


@admin.register(StreamState)
class StreamStateAdmin(admin.ModelAdmin):
    list_display = ("channel_name", "live", "transitioning", "upstream_down", "switch_started_at")
    readonly_fields = [field.name for field in StreamState._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
