"""What a session's stored work holds (``services/work_store.py``), read beside GraphQL because
the SAM 2 schema is fixed: which frames have masks and prompts, across a video of any length, and
the masks of a bounded range of frames, for a page that holds only the frames around the one it
shows."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from segmentation.errors import BadUserInput, SegmentationError
from segmentation.services.sessions import session_work_masks, session_work_summary
from segmentation.views.responses import refusal

# The longest frame index read from a query: past any video's length, and within every
# database's integers.
FRAME_INDEX_MAX_DIGITS = 9


@require_safe
def session_work_view(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /sessions/<session_id>/work``: ``{"kept", "video", "objects": [{"object_id",
    "mask_runs": [[first, last], ...], "prompts": [{"frame_index", "points", "labels"}, ...]},
    ...]}``, each object's frames with a mask as inclusive runs and its prompts (points in the
    engine's pixels, ``[0, 1]`` scaled by width - 1 and height - 1, or null for a given mask),
    and the path of the video the work is of; ``kept`` is false, with no video and no objects,
    for a session that keeps no work."""
    try:
        summary = session_work_summary(session_id=session_id)
    except SegmentationError as error:
        return refusal(error)
    return JsonResponse(
        {
            "kept": summary is not None,
            "video": None if summary is None else summary.video,
            "objects": [
                {
                    "object_id": item.object_id,
                    "mask_runs": [[first, last] for first, last in item.mask_runs],
                    "prompts": [
                        {
                            "frame_index": prompt.frame_index,
                            "points": prompt.points,
                            "labels": prompt.labels,
                        }
                        for prompt in item.prompts
                    ],
                }
                for item in (summary.objects if summary else [])
            ],
        }
    )


@require_safe
def session_work_masks_view(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET /sessions/<session_id>/work/masks?first=F&last=L``: ``{"kept", "first", "last",
    "frames": [{"frame_index", "masks": [{"object_id", "counts"}, ...]}, ...]}``, the stored
    masks of the frames F to L (inclusive, at most ``WORK_MASKS_MAX_FRAMES``): COCO RLE counts
    at the video's size, only the frames with a mask, in order."""
    try:
        first, last = (_frame_index(request, name) for name in ("first", "last"))
        frames = session_work_masks(session_id=session_id, first=first, last=last)
    except SegmentationError as error:
        return refusal(error)
    return JsonResponse(
        {
            "kept": frames is not None,
            "first": first,
            "last": last,
            "frames": [
                {
                    "frame_index": frame_index,
                    "masks": [
                        {"object_id": object_id, "counts": counts}
                        for object_id, counts in masks.items()
                    ],
                }
                for frame_index, masks in frames or []
            ],
        }
    )


def _frame_index(request: HttpRequest, name: str) -> int:
    value = request.GET.get(name, "")
    if not (value.isascii() and value.isdigit() and len(value) <= FRAME_INDEX_MAX_DIGITS):
        raise BadUserInput(f"{name} must be a frame index (a whole number from 0): {value[:20]!r}")
    return int(value)
