"""URLs of the channel admin: its pages and its JSON API."""

from __future__ import annotations

from django.urls import path

from channels_admin import views

app_name = "channels_admin"

urlpatterns = [
    path("tv/", views.viewer_page, name="viewer"),
    path("tv/admin/", views.admin_page, name="admin-page"),
    path("api/config", views.config_view, name="config"),
    path("api/admin/channels", views.channels_view, name="channels"),
    path("api/admin/groups", views.groups_view, name="groups"),
    path("api/admin/channel", views.channel_select_view, name="channel-select"),
    path("api/admin/playlist/reload", views.playlist_reload_view, name="playlist-reload"),
    path("api/admin/guide/refresh", views.guide_refresh_view, name="guide-refresh"),
    path("api/admin/guide/programmes", views.guide_programmes_view, name="guide-programmes"),
    path("api/admin/status", views.status_view, name="status"),
    path("api/admin/private", views.private_view, name="private"),
    path("api/admin/links", views.links_view, name="links"),
    path("api/admin/links/<int:link_id>/revoke", views.link_revoke_view, name="link-revoke"),
    path("api/admin/schedule", views.schedule_view, name="schedule"),
    path("api/admin/schedule/programme", views.schedule_programme_view, name="schedule-programme"),
    path("api/admin/schedule/<int:entry_id>", views.schedule_entry_view, name="schedule-entry"),
]
