from __future__ import annotations

from unittest import mock

import pytest
from django.db import OperationalError

from config import __version__


@pytest.mark.django_db
def test_healthz_reports_status_version_and_engine(client, settings):
    settings.SEGMENTATION_ENGINE = "classic"

    response = client.get("/healthz")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"status": "ok", "version": __version__, "engine": "classic"}


@pytest.mark.django_db
def test_healthz_answers_503_when_the_database_is_unreachable(client, settings):
    settings.SEGMENTATION_ENGINE = "classic"
    failing_cursor = mock.patch(
        "config.healthz.connection.cursor", side_effect=OperationalError("connection refused")
    )

    with failing_cursor:
        response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "error",
        "version": __version__,
        "engine": "classic",
        "detail": "connection refused",
    }


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_healthz_accepts_only_get(client, method):
    response = getattr(client, method)("/healthz")

    assert response.status_code == 405
    assert response["Allow"] == "GET"
