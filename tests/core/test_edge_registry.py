"""What the apps register with the HTTP edge at start-up (core/edge_registry.py)."""

from __future__ import annotations

from graphql import parse

from core.edge_registry import graphql_cost, health_fields, shutdown_hooks
from segmentation.graphql.cost import operation_cost, operation_uploads


def test_the_segmentation_app_registered_its_cost_table_and_health_fields():
    table = graphql_cost()

    assert (table.cost, table.uploads) == (operation_cost, operation_uploads)
    assert list(health_fields()) == ["engine", "engine_model", "engine_chosen_because"]


def test_the_channel_admin_registered_the_hub_shutdown():
    assert [hook.__qualname__ for hook in shutdown_hooks()] == ["stream_hub_shutdown"]


def test_an_upload_is_told_by_its_root_fields():
    uploads = graphql_cost().uploads
    upload = parse("mutation { uploadVideo(file: null) { id } }")
    opening = parse('mutation { startSession(input: {path: "a"}) { sessionId } }')

    assert (uploads(upload, None), uploads(opening, None)) == (True, False)
