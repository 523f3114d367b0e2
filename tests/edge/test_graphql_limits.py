"""Limits on one GraphQL request: depth, size, root fields, introspection, batches."""

from __future__ import annotations

import pytest
from django.test import Client
from graphql import get_introspection_query

from edge.graphql import _limits, _validated_documents

pytestmark = pytest.mark.django_db

VIDEO_FIELDS = "fragment F on Video { path posterPath width height frameCount fps url posterUrl }"


def post(client: Client, query: str) -> tuple[int, dict]:
    response = client.post("/graphql", {"query": query}, content_type="application/json")
    return response.status_code, response.json()


def too_complex(message: str) -> tuple[int, dict]:
    return 400, {"errors": [{"message": message, "extensions": {"code": "QUERY_TOO_COMPLEX"}}]}


def without_locations(answer: tuple[int, dict]) -> tuple[int, dict]:
    status, body = answer
    for error in body.get("errors", []):
        error.pop("locations", None)
    return status, body


def test_the_defaults_admit_the_api_and_graphiql(client: Client) -> None:
    status, body = post(client, "{ videos { edges { node { ...F } } } } " + VIDEO_FIELDS)
    assert (status, body) == (200, {"data": {"videos": {"edges": []}}})

    status, body = post(client, get_introspection_query(descriptions=True))
    assert status == 200
    assert "errors" not in body
    assert body["data"]["__schema"]["queryType"] == {"name": "Query", "kind": "OBJECT"}


def test_depth(client: Client, settings) -> None:
    settings.GRAPHQL_MAX_DEPTH = 2  # root fields are at depth 0

    answer = post(client, "query Deep { videos { edges { node { path } } } }")

    assert without_locations(answer) == (
        400,
        {"errors": [{"message": "'Deep' exceeds maximum operation depth of 2."}]},
    )


def test_fields_counted_with_fragments_and_aliases(client: Client, settings) -> None:
    settings.GRAPHQL_MAX_FIELDS = 50
    roots = " ".join(f"v{n}: videos {{ edges {{ node {{ ...F }} }} }}" for n in range(5))

    answer = post(client, f"query Big {{ {roots} }} {VIDEO_FIELDS}")

    assert without_locations(answer) == too_complex("'Big' selects 55 fields; at most 50")


def test_root_fields(client: Client) -> None:
    roots = " ".join(f"v{n}: defaultVideo {{ path }}" for n in range(11))

    answer = post(client, f"{{ {roots} }}")

    assert without_locations(answer) == too_complex("the operation has 11 root fields; at most 10")


def test_fragments_spread_again_and_again_are_counted_without_expanding_them(
    client: Client,
) -> None:
    levels = 40  # 2**40 fields once expanded
    fragments = " ".join(
        f"fragment F{n} on Video {{ ...F{n + 1} ...F{n + 1} }}" for n in range(levels)
    )

    answer = post(
        client, f"{{ defaultVideo {{ ...F0 }} }} {fragments} fragment F{levels} on Video {{ path }}"
    )

    assert without_locations(answer) == too_complex(
        f"the operation selects {2**levels + 1} fields; at most 300"
    )


def test_introspection_can_be_turned_off(client: Client, settings) -> None:
    settings.GRAPHQL_INTROSPECTION = False

    refused = without_locations(post(client, "{ __schema { queryType { name } } }"))
    served = post(client, "{ videos { edges { cursor } } }")

    assert refused == (
        400,
        {
            "errors": [
                {
                    "message": "Cannot query '__schema': introspection is disabled.",
                }
            ]
        },
    )
    assert served == (200, {"data": {"videos": {"edges": []}}})


def test_batches_are_refused(client: Client) -> None:
    response = client.post(
        "/graphql",
        [{"query": "{ videos { edges { cursor } } }"}] * 2,
        content_type="application/json",
    )

    assert (response.status_code, response.json()) == (
        400,
        {"errors": [{"message": "The received data is not a valid JSON query."}]},
    )


def test_tokens(client: Client, settings) -> None:
    settings.GRAPHQL_MAX_TOKENS = 100
    query = "{ " + "__typename " * 120 + "}"  # commas and comments would not be tokens

    answer = without_locations(post(client, query))

    assert answer == (
        400,
        {
            "errors": [
                {
                    "message": (
                        "Syntax Error: Document contains more than 100 tokens. Parsing aborted."
                    )
                }
            ]
        },
    )


def test_a_validated_document_is_kept_for_the_limits_it_passed(client: Client, settings) -> None:
    query = "query Kept { videos { edges { node { path } } } }"
    assert _validated_documents.get((query, _limits())) is None

    first = post(client, query)
    kept = _validated_documents.get((query, _limits()))
    second = post(client, query)
    settings.GRAPHQL_MAX_DEPTH = 2
    refused = post(client, query)

    assert first == second == (200, {"data": {"videos": {"edges": []}}})
    assert kept is not None
    assert _validated_documents.get((query, _limits())) is None
    assert without_locations(refused) == (
        400,
        {"errors": [{"message": "'Kept' exceeds maximum operation depth of 2."}]},
    )
