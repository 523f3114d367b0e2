"""What the segmentation service keeps: videos, uploads being prepared, the clients' deletion
IDs, terms acceptances, uploaded annotations, and the work each owner does on a video (its
prompts and masks). Files live under ``MEDIA_ROOT``; rows hold their paths relative to it."""

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


class VideoPreparation(models.Model):
    """An uploaded video being made into the stored format, in the background
    (``services/preparations.py``): its state, how far it has come, why it failed. It becomes a
    :class:`Video` only once ready, so no session can be opened on it before; its source file
    (``source_path``) is kept until then, so that a restarted server can prepare it again.

    ``worker`` names the server process that holds it, and ``heartbeat`` is when that process
    last said it still does: a preparation whose holder stopped saying so is taken up by
    another (or the same, restarted)."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        PREPARING = "preparing", "Preparing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    UNFINISHED = (State.QUEUED, State.PREPARING)

    id = models.UUIDField(primary_key=True, editable=False)
    owner = models.CharField(
        max_length=64, db_index=True, editable=False, help_text="The uploader's session key."
    )
    client = models.CharField(
        max_length=64, db_index=True, editable=False, help_text="The uploader's address."
    )
    deletion_id = models.ForeignKey(
        DeletionId, null=True, blank=True, on_delete=models.SET_NULL, related_name="preparations"
    )
    file_name = models.CharField(max_length=DISPLAY_NAME_MAX, help_text="As it was uploaded.")
    source_path = models.CharField(max_length=500, help_text="Relative to MEDIA_ROOT.")
    source_bytes = models.PositiveBigIntegerField()
    start = models.FloatField(help_text="Seconds.")
    duration = models.FloatField(help_text="Seconds, at most.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    frames_done = models.PositiveIntegerField(default=0)
    frames_total = models.PositiveIntegerField(default=0, help_text="About; 0 while unknown.")
    failure = models.TextField(blank=True, default="", help_text="Why it failed, for people.")
    attempts = models.PositiveSmallIntegerField(default=0)
    video = models.ForeignKey(
        Video, null=True, blank=True, on_delete=models.CASCADE, related_name="preparations"
    )
    worker = models.CharField(max_length=32, blank=True, default="", editable=False)
    heartbeat = models.DateTimeField(db_index=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return f"{self.file_name} ({self.state})"

    @property
    def unfinished(self) -> bool:
        return self.state in self.UNFINISHED

    @property
    def progress(self) -> float:
        """The share done, 0 to 1 (1 only once ready)."""
        if self.state == self.State.READY:
            return 1.0
        if not self.frames_total:
            return 0.0
        return min(0.99, self.frames_done / self.frames_total)


class Work(models.Model):
    """One owner's work on one video: every prompt its sessions took and every mask they showed,
    kept as they are made (``services/work_store.py``). The owner is the browser's cookie session,
    as for deletion IDs: the work goes with its video, and with its owner's session once that
    expires (``manage.py purge_expired``)."""

    video = models.ForeignKey(Video, on_delete=models.CASCADE, related_name="works")
    owner = models.CharField(max_length=64, db_index=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["video", "owner"], name="work_one_per_video_and_owner")
        ]

    def __str__(self) -> str:
        return f"work on {self.video.path}"


class WorkPrompt(models.Model):
    """An object's prompt on a frame: its clicks (a box's two corners first, in the video's
    pixels as the engine keeps them, so that they come back exactly), or none for a mask given
    as the prompt. The frame's mask is the object's ``WorkMask`` there."""

    work = models.ForeignKey(Work, on_delete=models.CASCADE, related_name="prompts")
    object_id = models.PositiveIntegerField()
    frame_index = models.PositiveIntegerField()
    points = models.JSONField(null=True, help_text="[[x, y], ...] in pixels; null: a given mask.")
    labels = models.JSONField(null=True)
    # The engine's own form of the anchor (VideoState.anchor_kept), so that a session opened on
    # the work later continues exactly as the one that made it would have; null: none.
    kept = models.BinaryField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["work", "object_id", "frame_index"], name="work_prompt_one_per_frame"
            )
        ]

    def __str__(self) -> str:
        return f"object {self.object_id} on frame {self.frame_index}"


class WorkMask(models.Model):
    """An object's mask on a frame, as last shown: COCO RLE counts at the video's size. Only
    masks with a pixel are kept; a frame's rows are replaced whole each time it is shown."""

    work = models.ForeignKey(Work, on_delete=models.CASCADE, related_name="masks")
    frame_index = models.PositiveIntegerField()
    object_id = models.PositiveIntegerField()
    counts = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["work", "frame_index", "object_id"], name="work_mask_one_per_object"
            )
        ]

    def __str__(self) -> str:
        return f"mask of object {self.object_id} on frame {self.frame_index}"


class PropagationJob(models.Model):
    """A propagation run in the background on an owner's work (``services/propagation_jobs.py``):
    it goes on when the page that started it closes, any page of the owner's sees its progress
    and may cancel it, and a restarted server takes it up from the last frame it stored."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        CANCELLED = "cancelled", "Cancelled"
        FAILED = "failed", "Failed"

    work = models.ForeignKey(Work, on_delete=models.CASCADE, related_name="jobs")
    start_frame = models.PositiveIntegerField()
    direction = models.CharField(max_length=10)  # "both", "forward" or "backward"
    end_frame = models.PositiveIntegerField(null=True, blank=True)  # None: the video's end
    frame_count = models.PositiveIntegerField(help_text="Frames it computes in all.")
    done = models.PositiveIntegerField(default=0, help_text="Frames computed and stored so far.")
    last_frame = models.IntegerField(default=-1, help_text="The frame stored last.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    reason = models.CharField(max_length=300, blank=True, default="")
    # What the engine carried to its next frame, kept every PROPAGATION_JOB_CARRY_FRAMES frames
    # (VideoState.carry), with the frames done then: a job taken up goes on from there.
    carry = models.BinaryField(null=True, blank=True)
    carry_done = models.PositiveIntegerField(default=0)
    session_id = models.CharField(max_length=100, help_text="The session it runs on.")
    runner = models.CharField(max_length=64, db_index=True, help_text="The process running it.")
    heartbeat = models.DateTimeField(help_text="When its process last said it still runs it.")
    created = models.DateTimeField(auto_now_add=True)
    ended = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["work"],
                condition=Q(status="running"),
                name="propagation_job_one_running_per_work",
            )
        ]

    def __str__(self) -> str:
        return f"propagation from frame {self.start_frame} ({self.status})"
