from __future__ import annotations

import re
from urllib.parse import unquote

from django.contrib.staticfiles import finders

PING = "query Ping($input: PingInput!) { ping(input: $input) { success } }"


def test_post_json_runs_a_query(client):
    response = client.post(
        "/graphql",
        {"query": PING, "variables": {"input": {"sessionId": "no-such-session"}}},
        content_type="application/json",
    )

    assert response.status_code == 200
    assert response.json() == {"data": {"ping": {"success": False}}}


def test_post_without_csrf_token_is_accepted_for_cross_origin_clients(client):
    client.handler.enforce_csrf_checks = True

    response = client.post("/graphql", {"query": "{ __typename }"}, content_type="application/json")

    assert response.status_code == 200
    assert response.json() == {"data": {"__typename": "Query"}}


def test_invalid_query_is_a_graphql_error(client):
    response = client.post("/graphql", {"query": "{ nope }"}, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {
                "message": "Cannot query field 'nope' on type 'Query'. Did you mean 'node'?",
                "locations": [{"line": 1, "column": 3}],
            }
        ]
    }


def test_cors_preflight_allows_a_localhost_origin_with_credentials(client):
    response = client.options(
        "/graphql",
        headers={
            "Origin": "http://localhost:7262",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )

    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "http://localhost:7262"
    assert response["Access-Control-Allow-Credentials"] == "true"


def test_cors_refuses_other_origins(client):
    response = client.post(
        "/graphql",
        {"query": "{ __typename }"},
        content_type="application/json",
        headers={"Origin": "https://evil.example"},
    )

    assert "Access-Control-Allow-Origin" not in response


def test_browser_get_serves_graphiql_from_local_static_files(client):
    response = client.get("/graphql", headers={"Accept": "text/html"})

    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn." not in html
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert len(sources) == 8
    for source in sources:
        assert source.startswith("/static/"), source
        relative = unquote(source.removeprefix("/static/"))
        assert finders.find(relative) is not None, (
            f"{relative} is not installed (make test fetches it)"
        )
