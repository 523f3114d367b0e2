"""``GET /docs/<name>.md``: the project's documentation (docs/), as the Markdown it is written in,
so that the pages can link to it from a running server (the annotator links to the engines page)."""

from __future__ import annotations

from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest
from django.views.decorators.http import require_safe


@require_safe
def docs_page(request: HttpRequest, name: str) -> FileResponse:
    path = settings.BASE_DIR / "docs" / f"{name}.md"
    if not path.is_file():
        raise Http404(f"no page docs/{name}.md")
    return FileResponse(path.open("rb"), content_type="text/markdown; charset=utf-8")
