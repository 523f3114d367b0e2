"""The Django admin of videos, deletion IDs, terms acceptances and annotations, and a page of who
holds which segmentation sessions."""

from __future__ import annotations

import itertools

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse

from segmentation.models import Annotation, DeletionId, TermsAcceptance, Video
from segmentation.services.sessions import sessions_held


@admin.register(Video)
class VideoAdmin(admin.ModelAdmin):
    list_display = ("path", "origin", "width", "height", "frame_count", "duration", "created")
    list_filter = ("origin",)
    search_fields = ("path", "sha256")
    readonly_fields = ("sha256", "width", "height", "fps", "frame_count", "duration", "created")


@admin.register(DeletionId)
class DeletionIdAdmin(admin.ModelAdmin):
    list_display = ("id", "session_key", "created")


@admin.register(TermsAcceptance)
class TermsAcceptanceAdmin(admin.ModelAdmin):
    list_display = ("session_key", "version", "accepted")


@admin.register(Annotation)
class AnnotationAdmin(admin.ModelAdmin):
    list_display = ("video", "deletion_id", "created")
    exclude = ("data",)


def sessions_admin(request: HttpRequest) -> TemplateResponse:
    """``/admin/segmentation/sessions/`` (staff only, through ``admin.site.admin_view``): each
    client address with the sessions it holds, most first; each session's video, age and idle
    time."""
    by_client = itertools.groupby(sessions_held(), key=lambda session: session.client)
    clients = sorted(
        ((client, list(sessions)) for client, sessions in by_client),
        key=lambda item: (-len(item[1]), item[0]),
    )
    context = {
        **admin.site.each_context(request),
        "title": "Segmentation sessions",
        "clients": clients,
        "total": sum(len(sessions) for _, sessions in clients),
    }
    return TemplateResponse(request, "segmentation/admin_sessions.html", context)
