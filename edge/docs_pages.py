"""``/docs/``: the project's documentation (docs/), so that the pages can link to it from a
running server (the site's menu links the index, the annotator the engines page).

- ``GET /docs/`` is the index: every page of docs/, by its title.
- ``GET /docs/<name>.md`` is a page. One address, two answers, by the request's ``Accept``: a
  browser (which prefers ``text/html``) gets the page rendered in the site's layout; ``curl``
  and other clients (``*/*``, ``text/markdown``, ``text/plain``) get the Markdown as written.
  The pages' relative links (``benchmarks.md``) stay on ``/docs/``, so a browser follows them
  to rendered pages too. The index is answered the same two ways.
- What people type instead finds its page: ``/docs/<name>`` moves to ``/docs/<name>.md``, and
  ``/docs/README.md`` or ``/docs/index`` (a folder's front page elsewhere) to the index. Any
  other address under ``/docs/`` is a 404 that lists the pages, where Django's bare "Not Found"
  was before (issue 48).
"""

from __future__ import annotations

from pathlib import Path

import markdown
from django.conf import settings
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import patch_vary_headers
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_safe

# The first is what a client that takes anything (curl's */*) gets: the text as written.
RAW_TYPES = ["text/markdown", "text/plain"]
HTML = "text/html"
# Tables and fenced code are how the docs are written; toc gives headings the ids that
# "page.md#heading" links point at.
EXTENSIONS = ["tables", "fenced_code", "toc"]
# Names of a folder's front page elsewhere (GitHub shows docs/README.md for docs/): the index.
INDEX_NAMES = frozenset({"README", "readme", "index"})
INDEX_TITLE = "Documentation"


def _docs() -> Path:
    return settings.BASE_DIR / "docs"


@require_safe
def docs_index(request: HttpRequest) -> HttpResponse:
    """``/docs/``: every page, by its title."""
    return _answer(request, _index_text(), title=INDEX_TITLE)


@require_safe
def docs_page(request: HttpRequest, name: str) -> HttpResponse:
    """``/docs/<name>.md``: the page, rendered for a browser and as written for others."""
    if name in INDEX_NAMES:
        return redirect("docs_index")
    path = _docs() / f"{name}.md"
    if not path.is_file():
        return _missing(request, f"{name}.md")
    wanted = request.get_preferred_type([*RAW_TYPES, HTML])
    if wanted == HTML:
        text = path.read_text(encoding="utf-8")
        response = _rendered(request, text, title=_title(text) or f"{name}.md")
    else:  # a client that takes none of them still gets the text rather than a 406
        content_type = wanted or RAW_TYPES[0]
        response = FileResponse(path.open("rb"), content_type=f"{content_type}; charset=utf-8")
    # Caches must keep the two answers apart.
    patch_vary_headers(response, ["Accept"])
    return response


@require_safe
def docs_page_unsuffixed(request: HttpRequest, name: str) -> HttpResponse:
    """``/docs/<name>``: moved to the page's own address (permanently: it is the page's)."""
    if name in INDEX_NAMES:
        return redirect("docs_index")
    if (_docs() / f"{name}.md").is_file():
        return redirect("docs_page", name=name, permanent=True)
    return _missing(request, name)


@require_safe
def docs_missing(request: HttpRequest, rest: str) -> HttpResponse:
    """Any other address under ``/docs/``."""
    return _missing(request, rest)


def _missing(request: HttpRequest, asked: str) -> HttpResponse:
    """A 404 naming what was asked for, and the pages there are. The address is the client's
    own text: it goes into the page as a heading the template escapes, never into Markdown,
    which would pass HTML in it through."""
    heading = f"No page docs/{asked}"
    text = f"The documentation has these pages:\n\n{_page_list()}"
    return _answer(request, text, title=heading, heading=heading, status=404)


def _answer(
    request: HttpRequest, text: str, *, title: str, heading: str = "", status: int = 200
) -> HttpResponse:
    """Markdown ``text`` (the project's own) under ``heading`` as a page of the site for a
    browser, and as written for other clients."""
    wanted = request.get_preferred_type([*RAW_TYPES, HTML])
    if wanted == HTML:
        response = _rendered(request, text, title=title, heading=heading, status=status)
    else:
        content_type = f"{wanted or RAW_TYPES[0]}; charset=utf-8"
        raw = f"# {heading}\n\n{text}" if heading else text
        response = HttpResponse(raw, content_type=content_type, status=status)
    patch_vary_headers(response, ["Accept"])
    return response


def _rendered(
    request: HttpRequest, text: str, *, title: str, heading: str = "", status: int = 200
) -> HttpResponse:
    # The docs are the project's own files, so the HTML they hold is trusted as written.
    body = markdown.markdown(text, extensions=EXTENSIONS, output_format="html")
    context = {"title": title, "heading": heading, "body": mark_safe(body), "nav": "docs"}  # noqa: S308
    return render(request, "docs/page.html", context, status=status)


def _index_text() -> str:
    return (
        f"# {INDEX_TITLE}\n\n"
        "The project's documentation, as the repository's `docs/` folder holds it; the README,"
        " at the repository's root, is the first five minutes.\n\n"
        f"{_page_list()}"
    )


def _page_list() -> str:
    """A Markdown list of the pages, each linked by its title, by file name."""
    lines = []
    for path in sorted(_docs().glob("*.md")):
        title = _title(path.read_text(encoding="utf-8")) or path.name
        lines.append(f"- [{title}]({path.name}) (`{path.name}`)")
    return "\n".join(lines) + "\n"


def _title(text: str) -> str | None:
    """The page's first level-one heading, as text."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None
