"""Another website cannot make a visitor's browser run mutations here (issue 36, finding 4).

Each attack is sent to the real server as a browser sends it from a page on another site: a
form post (no CORS preflight) with that page's ``Origin`` and ``Sec-Fetch-Site: cross-site``.
Before the refusal existed each of these ran; now each is a 403 before the view runs, and
nothing is left behind. Pages CORS allows (the SAM 2 demo frontend on localhost) and clients
that are not browsers are not affected.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import requests

from tests.conftest import running_server
from tests.segmentation.synthetic import make_video, write_mp4

EVIL = "http://evil.example"
FROM_EVIL = {"Origin": EVIL, "Sec-Fetch-Site": "cross-site"}
START = 'mutation { startSession(input: {path: "gallery/default.mp4"}) { sessionId } }'
SHARE = "mutation($file: Upload!) { uploadSharedVideo(file: $file) { path } }"


@pytest.fixture(scope="module")
def server(default_video_var: Path):
    var_dir = default_video_var
    with running_server(var_dir) as base_url:
        yield base_url, var_dir


def graphql_refusal(message: str) -> dict:
    return {
        "data": None,
        "errors": [{"message": message, "extensions": {"code": "CROSS_SITE_REFUSED"}}],
    }


def deletion_ids(var_dir: Path) -> int:
    with sqlite3.connect(var_dir / "db.sqlite3") as database:
        return database.execute("SELECT COUNT(*) FROM segmentation_deletionid").fetchone()[0]


def test_a_form_post_from_another_site_runs_no_mutation(server):
    base_url, var_dir = server
    before = deletion_ids(var_dir)

    started = requests.post(
        f"{base_url}/graphql", data={"query": START}, headers=FROM_EVIL, timeout=30
    )
    created = requests.post(
        f"{base_url}/graphql",
        data={"query": "mutation { createDeletionId }"},
        headers=FROM_EVIL,
        timeout=30,
    )

    refusal = graphql_refusal(f"cross-site request refused: {EVIL} is not an allowed origin")
    assert (started.status_code, started.json()) == (403, refusal)
    assert (created.status_code, created.json()) == (403, refusal)
    assert deletion_ids(var_dir) == before


def test_a_multipart_upload_from_another_site_leaves_no_file(server, tmp_path):
    base_url, var_dir = server
    source = write_mp4(make_video(6), tmp_path / "clip.mp4")
    operations = {"query": SHARE, "variables": {"file": None}}

    answer = requests.post(
        f"{base_url}/graphql",
        files={
            "operations": (None, json.dumps(operations)),
            "map": (None, json.dumps({"1": ["variables.file"]})),
            "1": ("clip.mp4", source.read_bytes(), "video/mp4"),
        },
        headers=FROM_EVIL,
        timeout=60,
    )

    assert answer.status_code == 403
    assert answer.json()["errors"][0]["extensions"] == {"code": "CROSS_SITE_REFUSED"}
    assert sorted((var_dir / "media").rglob("shared/*")) == []


def test_a_cross_site_request_without_origin_is_refused_by_its_fetch_metadata(server):
    base_url, _ = server

    answer = requests.post(
        f"{base_url}/graphql",
        data={"query": START},
        headers={"Sec-Fetch-Site": "cross-site"},
        timeout=30,
    )

    assert (answer.status_code, answer.json()) == (
        403,
        graphql_refusal("cross-site request refused: another site is not an allowed origin"),
    )


def test_a_propagation_cannot_be_started_from_another_site(server):
    base_url, _ = server

    answer = requests.post(
        f"{base_url}/propagate_in_video",
        data=json.dumps({"session_id": "any"}),
        headers={**FROM_EVIL, "Content-Type": "text/plain"},
        timeout=30,
    )

    assert (answer.status_code, answer.json()) == (
        403,
        {
            "error": f"cross-site request refused: {EVIL} is not an allowed origin",
            "code": "CROSS_SITE_REFUSED",
        },
    )


@pytest.mark.parametrize(
    "headers",
    [
        # the SAM 2 demo frontend's origin, allowed by the CORS settings
        {"Origin": "http://localhost:7262", "Sec-Fetch-Site": "same-site"},
        # the annotator, on the server's own origin
        {"Origin": "SELF", "Sec-Fetch-Site": "same-origin"},
        # a client that is not a browser
        {},
    ],
    ids=["cors-allowed", "same-origin", "no-browser"],
)
def test_allowed_origins_and_other_clients_still_run_mutations(server, headers):
    base_url, _ = server
    if headers.get("Origin") == "SELF":
        headers = {**headers, "Origin": base_url}

    answer = requests.post(
        f"{base_url}/graphql", data={"query": START}, headers=headers, timeout=30
    )

    assert answer.status_code == 200
    session_id = answer.json()["data"]["startSession"]["sessionId"]
    closed = requests.post(
        f"{base_url}/graphql",
        json={
            "query": f'mutation {{ closeSession(input: {{sessionId: "{session_id}"}}) '
            "{ success } }"
        },
        timeout=30,
    )
    assert closed.json() == {"data": {"closeSession": {"success": True}}}


def test_queries_from_another_site_are_not_refused(server):
    base_url, _ = server

    answer = requests.get(
        f"{base_url}/graphql",
        params={"query": "{ defaultVideo { path } }"},
        headers={**FROM_EVIL, "Accept": "application/json"},
        timeout=30,
    )

    assert answer.json() == {"data": {"defaultVideo": {"path": "gallery/default.mp4"}}}
