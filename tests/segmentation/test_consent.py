"""Cookie sessions and deletion IDs expire, and no anonymous call makes either needlessly
(issue 36: fuzzing left 11,530 session rows and 3,835 deletion IDs behind)."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from segmentation.models import Annotation, DeletionId, Video, VideoPreparation, Work

pytestmark = pytest.mark.django_db


def client_session(*, expired: bool) -> str:
    store = SessionStore()
    store.create()
    if expired:
        Session.objects.filter(session_key=store.session_key).update(
            expire_date=timezone.now() - timedelta(seconds=1)
        )
    return store.session_key


def deletion_id(name: str, session_key: str) -> DeletionId:
    return DeletionId.objects.create(id=name, session_key=session_key)


def video(path: str, owner: DeletionId | None) -> Video:
    return Video.objects.create(
        path=path,
        poster_path=f"{path}.jpg",
        width=64,
        height=48,
        fps=24,
        frame_count=24,
        duration=1,
        sha256=path,
        origin=Video.Origin.UPLOAD,
        deletion_id=owner,
    )


def purge() -> str:
    out = io.StringIO()
    call_command("purge_expired", stdout=out)
    return out.getvalue()


def test_expired_sessions_go_with_the_deletion_ids_that_own_nothing():
    # given
    idle = client_session(expired=True)
    deletion_id("idle-1", idle)
    deletion_id("idle-2", idle)
    uploader = client_session(expired=True)
    video("uploads/kept.mp4", deletion_id("uploader-old", uploader))
    deletion_id("uploader-new", uploader)  # owns nothing, but its client does: kept
    annotator = client_session(expired=True)
    Annotation.objects.create(
        video=video("gallery/shared.mp4", None),
        data={},
        deletion_id=deletion_id("annotator", annotator),
    )
    live = client_session(expired=False)
    deletion_id("live", live)  # owns nothing yet; its client may still upload
    shared = Video.objects.get(path="gallery/shared.mp4")
    Work.objects.create(video=shared, owner=annotator)  # expired with its owner
    kept = Work.objects.create(video=shared, owner=live)
    deletion_id("session-gone", "no-such-session")

    # when
    first, second = purge(), purge()

    # then
    assert first == (
        "deleted 3 expired session(s), 1 work(s) kept for them and 3 deletion ID(s) that owned "
        "nothing\n"
    )
    assert second == (
        "deleted 0 expired session(s), 0 work(s) kept for them and 0 deletion ID(s) that owned "
        "nothing\n"
    )
    assert list(Session.objects.values_list("session_key", flat=True)) == [live]
    assert sorted(DeletionId.objects.values_list("id", flat=True)) == [
        "annotator",
        "live",
        "uploader-new",
        "uploader-old",
    ]
    assert Video.objects.get(path="uploads/kept.mp4").deletion_id_id == "uploader-old"
    assert Annotation.objects.get().deletion_id_id == "annotator"
    assert list(Work.objects.all()) == [kept]


def preparation(owner: str, state: str) -> VideoPreparation:
    return VideoPreparation.objects.create(
        id=uuid.uuid4(),
        owner=owner,
        client="127.0.0.1",
        file_name=f"{state}.mp4",
        source_path=f"preparing/{state}.source",
        source_bytes=1,
        start=0,
        duration=10,
        state=state,
        heartbeat=timezone.now(),
    )


def test_a_failed_upload_goes_with_its_owners_session():
    # given the failures of an expired session's uploads and of a live one's
    expired, live = client_session(expired=True), client_session(expired=False)
    gone = preparation(expired, VideoPreparation.State.FAILED)
    unfinished = preparation(expired, VideoPreparation.State.PREPARING)
    read_later = preparation(live, VideoPreparation.State.FAILED)

    # when
    purge()

    # then the expired one's failure is gone; what is still being prepared, and the live
    # session's failure, stay
    assert sorted(VideoPreparation.objects.values_list("pk", flat=True)) == sorted(
        [unfinished.pk, read_later.pk]
    )
    assert not VideoPreparation.objects.filter(pk=gone.pk).exists()


def test_only_the_consent_mutations_and_the_annotator_make_a_session(client: Client):
    # given: what an anonymous client does without asking for a deletion ID or annotating
    for page in ("/", "/tv/", "/admin/login/", "/healthz", "/graphql"):
        client.get(page)
    for query in (
        "{ __typename }",
        'query { ping(input: {sessionId: "none"}) { success } }',
        'mutation { startSession(input: {path: "gallery/none.mp4"}) { sessionId } }',
    ):
        client.post("/graphql", {"query": query}, content_type="application/json")
    before = Session.objects.count()

    # when
    created = client.post(
        "/graphql", {"query": "mutation { createDeletionId }"}, content_type="application/json"
    )

    # then
    assert before == 0
    assert created.status_code == 200
    assert Session.objects.count() == 1
    assert DeletionId.objects.get().session_key == Session.objects.get().session_key


def test_the_annotator_page_makes_the_session_its_work_is_kept_for(client: Client):
    # when an anonymous client opens the annotator, twice
    client.get("/annotate/")
    client.get("/annotate/")

    # then it has one cookie session, which its work will belong to
    assert list(Session.objects.values_list("session_key", flat=True)) == [
        client.cookies["sessionid"].value
    ]
