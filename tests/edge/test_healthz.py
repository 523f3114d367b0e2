from __future__ import annotations

from unittest import mock

import pytest
from django.db import OperationalError

from edge import __version__


@pytest.fixture
def chosen_by_default(settings, tmp_path) -> str:
    """SEGMENTATION_ENGINE unset, with an empty models folder: the reason the engine was chosen."""
    settings.SEGMENTATION_ENGINE = "auto"
    settings.SAM2_MODELS_DIR = tmp_path / "models"
    return f"no learned checkpoint in {tmp_path / 'models'}"


@pytest.mark.django_db
def test_healthz_reports_status_version_and_engine(client, chosen_by_default):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "status": "ok",
        "version": __version__,
        "engine": "classic",
        "engine_model": "classic: no weights, CPU",
        "engine_chosen_because": chosen_by_default,
    }


@pytest.mark.django_db
def test_healthz_answers_503_when_the_database_is_unreachable(client, chosen_by_default):
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
        "engine_chosen_because": chosen_by_default,
        "detail": "connection refused",
    }


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_healthz_accepts_only_get(client, method):
    response = getattr(client, method)("/healthz")

    assert response.status_code == 405
    assert response["Allow"] == "GET"
