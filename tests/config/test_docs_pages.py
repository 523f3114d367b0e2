"""``/docs/<name>.md``: the documentation served as written, for the pages' links."""

from __future__ import annotations

from django.test import Client

from tests.conftest import ROOT


def test_a_page_is_served_as_markdown() -> None:
    response = Client().get("/docs/engines.md")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert b"".join(response.streaming_content) == (ROOT / "docs" / "engines.md").read_bytes()


def test_only_pages_of_docs_are_served() -> None:
    client = Client()

    assert client.get("/docs/nothing-here.md").status_code == 404
    assert client.get("/docs/..%2FREADME.md").status_code == 404
    assert client.post("/docs/engines.md").status_code == 405
