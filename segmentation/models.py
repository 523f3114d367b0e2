"""What the segmentation service keeps: videos, the clients' deletion IDs, terms acceptances and
uploaded annotations. Files live under ``MEDIA_ROOT``; rows hold their paths relative to it."""

from __future__ import annotations

from pathlib import PurePosixPath

from django.db import models
from django.db.models import Q

from segmentation.video_shape import VideoShape

DISPLAY_NAME_MAX = 120


class DeletionId(models.Model):
    """A client's handle on its own data: ``manage.py delete_user_data ID`` removes its uploads."""

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    session_key = models.CharField(max_length=64, db_index=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id


class Video(models.Model):
    """A video of the library. Stored files are named by content (``uploads/<sha256>.mp4``) and
    ``path`` is what the API knows it by; ``display_name`` is what people see (an upload's own
    file name, cleaned and unique in the gallery)."""

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
    display_name = models.CharField(
        max_length=DISPLAY_NAME_MAX,
        blank=True,
        default="",
        help_text="The uploader's file name, cleaned; blank for imported and older videos.",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            # Two uploads finishing together cannot both take a name: the second one's write
            # fails and it picks the next free number.
            models.UniqueConstraint(
                fields=["display_name"],
                condition=~Q(display_name="") & ~Q(origin="shared"),
                name="video_display_name_unique_in_gallery",
            )
        ]

    def __str__(self) -> str:
        return self.path

    @property
    def name(self) -> str:
        """What people see: the display name, or else the stored file's name."""
        return self.display_name or PurePosixPath(self.path).name

    @property
    def shape(self) -> VideoShape:
        """Its name, size and length, as the annotation files' checks and exports take them."""
        return VideoShape(
            name=self.name, width=self.width, height=self.height, frame_count=self.frame_count
        )

    def export_name(self, *, suffix: str) -> str:
        """A download's file name: the name's stem and ``suffix`` (``clip-masks.zip``)."""
        return self.shape.export_name(suffix=suffix)


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
