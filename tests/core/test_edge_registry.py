"""What the apps register with the HTTP edge at start-up (core/edge_registry.py)."""

from __future__ import annotations

from graphql import parse

from channels_admin.services.playlists import playlist_ensure_loaded
from core.edge_registry import (
    asgi_routes,
    body_cap_of,
    graphql_cost,
    graphql_parts,
    health_fields,
    shutdown_hooks,
    startup_work,
)
from segmentation.apps import _process_start
from segmentation.graphql.cost import operation_cost, operation_uploads
from segmentation.graphql.schema import Mutations, Queries
from segmentation.graphql.types import Video
from segmentation.views.annotation_posts import ANNOTATIONS_BODY_CAP


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


def test_the_segmentation_app_registered_its_part_of_the_schema():
    parts = graphql_parts()

    assert [(part.queries, part.mutations, part.types) for part in parts] == [
        (Queries, Mutations, (Video,))
    ]


def test_the_playlist_is_loaded_at_start_before_the_engine():
    # the DATABASE phase (channels_admin's) before the PROCESS phase (segmentation's), though
    # segmentation registers first (INSTALLED_APPS)
    assert startup_work() == [playlist_ensure_loaded, _process_start]


def test_the_channel_admin_registered_its_consumers_routes():
    assert asgi_routes() == ["channels_admin.routing"]


def test_the_annotation_paths_have_the_segmentation_apps_body_cap():
    capped = ["/annotations/coco.json", "/annotations/yolo.zip", "/annotations/masks.zip"]
    others = ["/graphql", "/annotations/abc.json", "/sessions/abc/annotations/x"]

    assert [body_cap_of(path) for path in [*capped, "/sessions/abc/annotations"]] == [
        ANNOTATIONS_BODY_CAP
    ] * 4
    assert [body_cap_of(path) for path in others] == [None] * 3
