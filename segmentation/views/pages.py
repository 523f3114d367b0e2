"""The annotator's pages, the gallery and the annotate page, and the names the gallery shows
(the SAM 2 ``Video`` type, which the pages ask GraphQL for, has no field for them)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from segmentation.errors import ErrorCode
from segmentation.graphql.types import VIDEO_TYPE
from segmentation.selectors import MAX_PAGE_SIZE, video_names, video_of_id
from segmentation.services.consent import owner_key
from segmentation.services.process_engine import engine_describe
from segmentation.views.responses import error_response


@require_safe
def gallery_page(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "segmentation/gallery.html",
        {
            "nav": "segment",
            "max_upload_bytes": settings.MAX_UPLOAD_BYTES,
            "max_upload_minutes": f"{settings.MAX_UPLOAD_DURATION_SEC / 60:g}",
        },
    )


@require_safe
def annotate_page(request: HttpRequest) -> HttpResponse:
    # The page asks GraphQL for the video, whose SAM 2 type has no name: the name comes here.
    video = video_of_id(global_id=request.GET.get("video", ""), kind=VIDEO_TYPE)
    # The page's work is kept for its cookie session (services/work_store.py): it has one.
    owner_key(session=request.session, create=True)
    request.session.modified = True  # its expiry renewed: the work is kept while it is used
    context = {
        "nav": "segment",
        "engine": engine_describe(),
        "video_name": "" if video is None else video.name,
    }
    return render(request, "segmentation/annotate.html", context)


@require_safe
def video_names_view(request: HttpRequest) -> HttpResponse:
    """``GET /videos/names?path=<path>&path=...``: ``{"names": {path: name}}``, the names the
    gallery shows (the SAM 2 ``Video`` type has no field for them); unknown paths are left out."""
    paths = request.GET.getlist("path")
    if len(paths) > MAX_PAGE_SIZE:
        return error_response(
            400, ErrorCode.BAD_USER_INPUT, f"at most {MAX_PAGE_SIZE} paths, got {len(paths)}"
        )
    return JsonResponse({"names": video_names(paths=paths)})
