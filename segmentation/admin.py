from __future__ import annotations

from django.contrib import admin

from segmentation.models import Annotation, DeletionId, TermsAcceptance, Video


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
