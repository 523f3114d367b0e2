"""``/docs/<name>.md``: the documentation as written for ``curl``, rendered for a browser."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import ROOT

# What Chromium and Firefox send for a page.
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        (None, "text/markdown; charset=utf-8"),  # Django's test client, as curl: no preference
        ("*/*", "text/markdown; charset=utf-8"),
        ("text/markdown", "text/markdown; charset=utf-8"),
        ("text/plain", "text/plain; charset=utf-8"),
        ("image/png", "text/markdown; charset=utf-8"),  # nothing it takes: the text still
    ],
)
def test_a_client_gets_the_markdown_as_written(accept: str | None, content_type: str) -> None:
    headers = {} if accept is None else {"Accept": accept}

    response = Client().get("/docs/engines.md", headers=headers)

    assert response.status_code == 200
    assert response["Content-Type"] == content_type
    assert "Accept" in response["Vary"].split(", ")
    assert b"".join(response.streaming_content) == (ROOT / "docs" / "engines.md").read_bytes()


def test_a_browser_gets_the_page_rendered() -> None:
    response = Client().get("/docs/engines.md", headers={"Accept": BROWSER})

    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert "Accept" in response["Vary"].split(", ")  # beside the CORS middleware's "origin"
    html = response.content.decode()
    assert html.startswith("<!DOCTYPE html>")
    assert "<title>Segmentation engines</title>" in html
    assert '<h1 id="segmentation-engines">Segmentation engines</h1>' in html
    # a relative link stays on /docs/, where a browser gets the linked page rendered as well
    assert '<a href="segmentation-quality.md">segmentation-quality.md</a>' in html
    # and a link to a heading (deploy.md links to engines.md#which-engine-answers) finds its id
    assert '<h3 id="which-engine-answers">Which engine answers</h3>' in html
    # tables and fenced code are rendered, not left as text
    assert "<th>model, precision</th>" in html
    assert '<pre><code class="language-sh">' in html
    assert "```" not in html


def test_only_pages_of_docs_are_served() -> None:
    client = Client()

    assert client.get("/docs/nothing-here.md").status_code == 404
    assert client.get("/docs/..%2FREADME.md").status_code == 404
    assert client.post("/docs/engines.md").status_code == 405
