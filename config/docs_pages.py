"""``GET /docs/<name>.md``: the project's documentation (docs/), so that the pages can link to it
from a running server (the annotator links to the engines page).

One address, two answers, by the request's ``Accept``: a browser (which prefers
``text/html``) gets the page rendered in the site's layout; ``curl`` and other clients
(``*/*``, ``text/markdown``, ``text/plain``) get the Markdown as written. The pages' relative
links (``benchmarks.md``) stay on ``/docs/``, so a browser follows them to rendered pages too.
"""

from __future__ import annotations

from pathlib import Path

import markdown
from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_safe

# The first is what a client that takes anything (curl's */*) gets: the text as written.
RAW_TYPES = ["text/markdown", "text/plain"]
HTML = "text/html"
# Tables and fenced code are how the docs are written; toc gives headings the ids that
# "page.md#heading" links point at.
EXTENSIONS = ["tables", "fenced_code", "toc"]


@require_safe
def docs_page(request: HttpRequest, name: str) -> HttpResponse:
    path = settings.BASE_DIR / "docs" / f"{name}.md"
    if not path.is_file():
        raise Http404(f"no page docs/{name}.md")
    wanted = request.get_preferred_type([*RAW_TYPES, HTML])
    if wanted == HTML:
        response = _rendered(request, path, name)
    else:  # a client that takes none of them still gets the text rather than a 406
        content_type = wanted or RAW_TYPES[0]
        response = FileResponse(path.open("rb"), content_type=f"{content_type}; charset=utf-8")
    # Caches must keep the two answers apart.
    patch_vary_headers(response, ["Accept"])
    return response


def _rendered(request: HttpRequest, path: Path, name: str) -> HttpResponse:
    text = path.read_text(encoding="utf-8")
    # The docs are the project's own files, so the HTML they hold is trusted as written.
    body = markdown.markdown(text, extensions=EXTENSIONS, output_format="html")
    context = {"title": _title(text) or f"{name}.md", "body": mark_safe(body)}  # noqa: S308
    return render(request, "docs/page.html", context)


def _title(text: str) -> str | None:
    """The page's first level-one heading, as text."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None
