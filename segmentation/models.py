"""What the segmentation service keeps: videos, the clients' deletion IDs, terms acceptances and
uploaded annotations. Files live under ``MEDIA_ROOT``; rows hold their paths relative to it."""

from __future__ import annotations

from django.db import models


class DeletionId(models.Model):
    """A client's handle on its own data: ``manage.py delete_user_data ID`` removes its uploads."""

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    session_key = models.CharField(max_length=64, db_index=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id


class Video(models.Model):
    class Origin(models.TextChoices):
        GALLERY = "gallery", "Gallery"
        UPLOAD = "upload", "Upload"
        SHARED = "shared", "Shared"

    path = models.CharField(max_length=500, unique=True, help_text="Relative to MEDIA_ROOT.")
    poster_path = models.CharField(max_length=500, help_text="Relative to MEDIA_ROOT.")
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    fps = models.FloatField()
    frame_count = models.PositiveIntegerField()
    duration = models.FloatField(help_text="Seconds.")
    sha256 = models.CharField(max_length=64, db_index=True)
    origin = models.CharField(max_length=10, choices=Origin.choices)
    deletion_id = models.ForeignKey(
        DeletionId, null=True, blank=True, on_delete=models.SET_NULL, related_name="videos"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.path


class TermsAcceptance(models.Model):
    session_key = models.CharField(max_length=64, db_index=True)
    version = models.CharField(max_length=50)
    accepted = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.session_key} accepted {self.version}"


class Annotation(models.Model):
    """An uploaded annotation file (the export format), validated against its video."""

    video = models.ForeignKey(Video, on_delete=models.CASCADE, related_name="annotations")
    data = models.JSONField()
    deletion_id = models.ForeignKey(
        DeletionId, null=True, blank=True, on_delete=models.SET_NULL, related_name="annotations"
    )
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"annotation of {self.video.path}"
