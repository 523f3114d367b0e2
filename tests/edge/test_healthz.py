from __future__ import annotations

from unittest import mock

import pytest
from django.db import OperationalError

from edge import __version__
from segmentation.engines.choice import EngineChoice

CHOSEN = EngineChoice("classic", "", "no learned checkpoint in var/models")


@pytest.mark.django_db
def test_healthz_reports_status_version_and_engine(client, settings):
    settings.SEGMENTATION_ENGINE = "classic"
    settings.SEGMENTATION_ENGINE_CHOICE = CHOSEN

    response = client.get("/healthz")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "status": "ok",
        "version": __version__,
        "engine": "classic",
        "engine_model": "classic: no weights, CPU",
        "engine_chosen_because": "no learned checkpoint in var/models",
    }


@pytest.mark.django_db
def test_healthz_answers_503_when_the_database_is_unreachable(client, settings):
    settings.SEGMENTATION_ENGINE = "classic"
    settings.SEGMENTATION_ENGINE_CHOICE = CHOSEN
    failing_cursor = mock.patch(
        "edge.healthz.connection.cursor", side_effect=OperationalError("connection refused")
    )

    with failing_cursor:
        response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "error",
        "version": __version__,
        "engine": "classic",
        "engine_model": "classic: no weights, CPU",
        "engine_chosen_because": "no learned checkpoint in var/models",
        "detail": "connection refused",
    }


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_healthz_accepts_only_get(client, method):
    response = getattr(client, method)("/healthz")

    assert response.status_code == 405
    assert response["Allow"] == "GET"
