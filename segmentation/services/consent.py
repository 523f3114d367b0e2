"""What a client agrees to and how it takes its data back: terms acceptances and deletion IDs.

Both hang on the client's cookie session (Django's), so the uploads a client makes after asking
for a deletion ID are linked to it, and ``manage.py delete_user_data ID`` removes them, with
everything else recorded for that client.

Anonymous clients may ask for as many sessions and deletion IDs as they like, so both expire:
a cookie session after ``SESSION_COOKIE_DAYS`` without a change, and a client's deletion IDs with
its session, but only when none of them owns anything (``manage.py purge_expired``,
:func:`expired_records_purge`). Once the session is gone nothing new can be linked to its IDs, so
an ID that owns nothing then could only ever delete nothing. IDs that own uploads or annotations
are kept until ``delete_user_data``; so are terms acceptances, the record of what a client agreed
to before it uploaded (an upload made without a deletion ID is linked to no client, so no
acceptance can be shown to have been for nothing).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.contrib.sessions.models import Session
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from segmentation.models import (
    Annotation,
    DeletionId,
    TermsAcceptance,
    Video,
    VideoPreparation,
    Work,
)
from segmentation.services.frame_images import frame_images_delete
from segmentation.services.videos import media_path

DELETION_ID_KEY = "segmentation_deletion_id"


def _session_key(session: SessionBase) -> str:
    if session.session_key is None:
        session.save()
    return session.session_key


def owner_key(*, session: SessionBase, create: bool = False) -> str:
    """Whose data a request's work is: its cookie session's key (made now with ``create``),
    or "" for a request that brought no session, whose work is kept for no one."""
    if session.session_key is None and not create:
        return ""
    return _session_key(session)


def deletion_id_create(*, session: SessionBase) -> DeletionId:
    deletion_id = DeletionId.objects.create(
        # Hex: an ID must be safe to type, and never start with "-" on a command line.
        id=secrets.token_hex(16),
        session_key=_session_key(session),
    )
    session[DELETION_ID_KEY] = deletion_id.id
    return deletion_id


def deletion_id_current(*, session: SessionBase) -> DeletionId | None:
    """The client's latest deletion ID, if it asked for one."""
    value = session.get(DELETION_ID_KEY)
    return DeletionId.objects.filter(id=value).first() if value else None


def terms_accept(*, session: SessionBase) -> str:
    """Record that the client accepted the terms of service; the version accepted."""
    version = settings.TERMS_OF_SERVICE_VERSION
    TermsAcceptance.objects.create(session_key=_session_key(session), version=version)
    return version


@dataclass(frozen=True)
class Deleted:
    videos: int
    annotations: int


def user_data_delete(*, deletion_id: str) -> Deleted:
    """Delete the uploads and records of the client that holds ``deletion_id``: its videos (and
    their files), uploads being prepared (cancelled: their holder deletes their files), failed
    uploads, annotations, terms acceptances, kept work and deletion IDs. Unknown IDs raise
    LookupError."""
    found = DeletionId.objects.filter(id=deletion_id).first()
    if found is None:
        raise LookupError(f"no deletion ID {deletion_id!r}")
    client = DeletionId.objects.filter(session_key=found.session_key)
    with transaction.atomic():
        # First, so that no preparation becomes a video of the client's after the videos are
        # listed: the update waits for one finishing now (preparations.py locks its row), which
        # is then listed; the others are cancelled and never become videos.
        uploads = VideoPreparation.objects.filter(
            Q(owner=found.session_key) | Q(deletion_id__in=client)
        )
        uploads.filter(state__in=VideoPreparation.UNFINISHED).update(
            state=VideoPreparation.State.CANCELLED
        )
        uploads.filter(state=VideoPreparation.State.FAILED).delete()
        videos = list(Video.objects.filter(deletion_id__in=client))
        annotations, _ = Annotation.objects.filter(deletion_id__in=client).delete()
        Annotation.objects.filter(video__in=videos).delete()
        Video.objects.filter(pk__in=[v.pk for v in videos]).delete()
        TermsAcceptance.objects.filter(session_key=found.session_key).delete()
        Work.objects.filter(owner=found.session_key).delete()
        client.delete()
    for file in (media_path(v.path) for v in videos):
        file.unlink(missing_ok=True)
    for sha256 in {v.sha256 for v in videos}:
        frame_images_delete(sha256=sha256)
    posters = {v.poster_path for v in videos}
    still_used = set(
        Video.objects.filter(poster_path__in=posters).values_list("poster_path", flat=True)
    )
    for poster in posters - still_used:
        media_path(poster).unlink(missing_ok=True)
    return Deleted(len(videos), annotations)


@dataclass(frozen=True)
class Purged:
    sessions: int
    deletion_ids: int
    works: int = 0


@transaction.atomic
def expired_records_purge() -> Purged:
    """Delete the expired cookie sessions (Django's database sessions, the project's engine),
    the work kept for them (``work_store.py``: their prompts, masks and propagation jobs), then
    the deletion IDs of every client whose session is gone and whose IDs own nothing."""
    sessions, _ = Session.objects.filter(expire_date__lte=timezone.now()).delete()
    live = Session.objects.values("session_key")
    works = Work.objects.exclude(owner__in=live)
    works_deleted = works.count()
    works.delete()
    # A failed upload is kept for its owner to read why; with the owner gone, nobody will.
    VideoPreparation.objects.filter(state=VideoPreparation.State.FAILED).exclude(
        owner__in=live
    ).delete()
    owners = DeletionId.objects.filter(
        Q(videos__isnull=False) | Q(annotations__isnull=False)
    ).values("session_key")
    _, deleted = (
        DeletionId.objects.exclude(session_key__in=live).exclude(session_key__in=owners).delete()
    )
    return Purged(
        sessions=sessions,
        deletion_ids=deleted.get(DeletionId._meta.label, 0),
        works=works_deleted,
    )
