"""What a client agrees to and how it takes its data back: terms acceptances and deletion IDs.

Both hang on the client's cookie session (Django's), so the uploads a client makes after asking
for a deletion ID are linked to it, and ``manage.py delete_user_data ID`` removes them.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase

from segmentation.models import DeletionId, TermsAcceptance

DELETION_ID_KEY = "segmentation_deletion_id"


def _session_key(session: SessionBase) -> str:
    if session.session_key is None:
        session.save()
    return session.session_key


def deletion_id_create(*, session: SessionBase) -> DeletionId:
    deletion_id = DeletionId.objects.create(
        id=secrets.token_urlsafe(24), session_key=_session_key(session)
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
