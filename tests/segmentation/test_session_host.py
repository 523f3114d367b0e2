"""The session services run on the host the app's start-up gives them (``apps.py``): this
process's sessions, or, with ``SEGMENTATION_WORKERS``, the inference workers' client."""

from __future__ import annotations

import pytest

from segmentation import apps
from segmentation.services.local_sessions import local_sessions
from segmentation.services.sessions import session_host, session_host_provide
from segmentation.workers import client


@pytest.fixture
def host_restored():
    yield
    session_host_provide(local_sessions)


def test_without_workers_the_sessions_live_in_this_process():
    assert session_host() is local_sessions()


def test_with_workers_the_sessions_live_in_the_workers(settings, monkeypatch, host_restored):
    # given
    settings.SEGMENTATION_WORKERS = True
    workers = object()
    monkeypatch.setattr(client, "worker_client", lambda: workers)

    # when
    apps._session_host_wire()

    # then
    assert session_host() is workers
