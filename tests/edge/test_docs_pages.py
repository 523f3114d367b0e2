"""``/docs/``: the documentation as written for ``curl``, rendered for a browser; its index,
what people type for a page, and the site's icon, against the real server."""

from __future__ import annotations

import re
import struct

import cv2
import numpy as np
import pytest
import requests
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


# ---- the real server: the index, the addresses people type, and the icon (issue 48)

DOCS = sorted((ROOT / "docs").glob("*.md"))


def title(page) -> str:
    return next(line[2:] for line in page.read_text().splitlines() if line.startswith("# "))


def test_the_index_lists_every_page_by_its_title(asgi_server: str) -> None:
    rendered = requests.get(f"{asgi_server}/docs/", headers={"Accept": BROWSER}, timeout=10)
    written = requests.get(f"{asgi_server}/docs/", timeout=10)

    assert rendered.status_code == written.status_code == 200
    assert "<title>Documentation</title>" in rendered.text
    links = re.findall(r'<li><a href="([^"]+)">([^<]+)</a>', rendered.text)
    assert links == [(page.name, title(page)) for page in DOCS]
    assert written.headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert written.text.splitlines()[4:] == [
        f"- [{title(page)}]({page.name}) (`{page.name}`)" for page in DOCS
    ]


@pytest.mark.parametrize(
    ("path", "status", "location"),
    [
        ("/docs", 301, "/docs/"),
        ("/docs/channels", 301, "/docs/channels.md"),
        ("/docs/README.md", 302, "/docs/"),
        ("/docs/README", 302, "/docs/"),
        ("/docs/index.md", 302, "/docs/"),
    ],
)
def test_what_people_type_finds_its_page(
    asgi_server: str, path: str, status: int, location: str
) -> None:
    answer = requests.get(f"{asgi_server}{path}", allow_redirects=False, timeout=10)

    assert (answer.status_code, answer.headers["Location"]) == (status, location)


@pytest.mark.parametrize("asked", ["nothing", "engines.html", "channels/", "<b>bold</b>"])
def test_an_unknown_page_is_a_404_that_lists_the_pages(asgi_server: str, asked: str) -> None:
    answer = requests.get(f"{asgi_server}/docs/{asked}", headers={"Accept": BROWSER}, timeout=10)

    assert answer.status_code == 404
    escaped = asked.replace("<", "&lt;").replace(">", "&gt;")
    assert f"<h1>No page docs/{escaped}</h1>" in answer.text
    assert len(re.findall(r'<li><a href="[a-z-]+\.md">', answer.text)) == len(DOCS)


def test_the_site_serves_its_icon_and_browsers_keep_it(asgi_server: str) -> None:
    icon = requests.get(f"{asgi_server}/favicon.ico", timeout=10)
    svg = requests.get(f"{asgi_server}/favicon.svg", timeout=10)

    # an ICO holding one 32 x 32 PNG with transparency, and the same drawing as SVG
    assert icon.status_code == 200
    assert icon.headers["Content-Type"] == "image/x-icon"
    assert struct.unpack("<HHHBBBBHHII", icon.content[:22]) == (
        0, 1, 1, 32, 32, 0, 0, 1, 32, len(icon.content) - 22, 22
    )  # fmt: skip
    image = cv2.imdecode(np.frombuffer(icon.content[22:], np.uint8), cv2.IMREAD_UNCHANGED)
    assert image.shape == (32, 32, 4)
    assert svg.headers["Content-Type"] == "image/svg+xml"
    assert svg.text.startswith(
        '<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32" viewBox="0 0 32 32">'
    )
    # kept by browsers for a day, and asked again by its ETag
    for answer, path in ((icon, "/favicon.ico"), (svg, "/favicon.svg")):
        assert answer.headers["Cache-Control"] == "public, max-age=86400"
        again = requests.get(
            f"{asgi_server}{path}", headers={"If-None-Match": answer.headers["ETag"]}, timeout=10
        )
        assert (again.status_code, again.content) == (304, b"")
