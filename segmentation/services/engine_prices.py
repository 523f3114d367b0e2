"""What a request costs the engine, in the units the GraphQL operations are priced in
(``segmentation/graphql/cost.py``): each root field 1, each engine call :data:`ENGINE_CALL`
more, each point :data:`POINT`, each frame touched :data:`FRAME`, a session opened or an upload
:data:`OPEN`.

The plain endpoints are priced in the same units, for the per-client limit
(``RATE_LIMIT_COST``), never per frame of a file alone (a video may have 86,400 frames) and never
more for one request than half the limit's count (``core/rate_limits.py``
``rate_limit_capped``), so that one legitimate request, or one step of an import, always passes
for a client otherwise idle in its window, while a flood of them is still held to the limit:

- reading an annotation file (the import's and the exports'): 1 per :data:`FILE_BYTES` of it
  and 1 more (its masks are decoded to be checked; a mask of 100,000 isolated pixels, 200 KB, is
  51);
- an export (``/annotations/masks.zip``, ``coco.json``, ``yolo.zip``): besides, a flat
  :data:`EXPORT` per request, charged with the reading, before the file is parsed;
- a session's receipt (``GET /sessions/<id>/receipt``): :data:`RECEIPT`, the least a request
  is charged, for a known session or not. Signing a count is little work beside the request's
  own handling, but uncharged, a flood of them was bounded by nothing but the server's cores;
  at 1 it is held to the limit's count (3,000 a minute). More would be felt by the annotator,
  which asks for one each time its queue of operations empties, so at most once an operation:
  its clicks cost 18 each rather than 17;
- an annotation import (``POST /sessions/<id>/annotations``): besides, each frame as the
  ``addPoints`` it replays (:func:`frame_cost`: each object's clicks on the frame as one
  ``addPoints``; a mask given without clicks as one without points where the engine runs its
  model on it, SAM 2, and as a root field's 1 alone where it keeps the mask as it is, classic:
  there it reads no frame, and keeping it takes about 2 ms where a click's cut takes 50 to 100),
  charged before the frame is imported and only if the client has room for it; past its limit
  the import stops there, keeps what it did, and is continued later
  (``segmentation/services/annotation_imports.py``). Priced as clicks, a propagated export of
  the default video (3 objects on its 144 frames) was charged 3,300 with the classic engine,
  over a minute's limit (``RATE_LIMIT_COST``, 3,000) on its own: the page waited for the next
  minute to import the rest (issue 48); it is charged 500 now.
  Each prompt must be one that GraphQL would take as one request (:func:`import_prompts_check`:
  at most ``GRAPHQL_MAX_COST``, 21 points with the defaults); the file as a whole may have any
  number of them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from segmentation.errors import TooComplex
from segmentation.services.session_types import Annotations, FrameMasks

ENGINE_CALL = 4
POINT = 4
FRAME = 8
OPEN = 8
# A propagation started (POST /propagate_in_video), for the per-client limit: as a click.
PROPAGATION = 1 + ENGINE_CALL + POINT + FRAME
# Reading an annotation file: a unit per this many bytes (decoding and tracing 4 KB of a mask's
# runs takes about as long as a unit of a click).
FILE_BYTES = 4096
# An export's flat part, beside its reading: a file written, as a session opened.
EXPORT = 8
# A session's receipt (GET /sessions/<id>/receipt): a root field's 1.
RECEIPT = 1


def prompts_cost(prompts: Iterable[tuple[int, int]]) -> int:
    """What ``(frame_index, points)`` prompts would cost sent as ``addPoints`` (one root field
    each; a mask given as a prompt has no points), each frame counted once."""
    cost = 0
    frames: set[int] = set()
    for frame_index, points in prompts:
        cost += 1 + ENGINE_CALL + POINT * points
        frames.add(frame_index)
    return cost + FRAME * len(frames)


def frame_cost(frame: FrameMasks, *, given_masks_run_model: bool = True) -> int:
    """What importing the frame's prompts costs, as the ``addPoints`` they replay; a mask given
    without clicks costs 1 alone unless ``given_masks_run_model`` (see the module)."""
    if given_masks_run_model:
        return prompts_cost((frame.frame_index, len(item.points or ())) for item in frame.objects)
    clicked = [item for item in frame.objects if item.points is not None]
    kept = len(frame.objects) - len(clicked)
    return kept + prompts_cost((frame.frame_index, len(item.points)) for item in clicked)


def import_prompts_check(annotations: Annotations, *, max_cost: int) -> None:
    """:class:`TooComplex`, naming the first frame and object, for a prompt that one GraphQL
    request could not send (its ``addPoints`` alone costs over ``max_cost``)."""
    for frame in annotations.frames:
        for item in frame.objects:
            points = len(item.points or ())
            cost = prompts_cost([(frame.frame_index, points)])
            if cost > max_cost:
                raise TooComplex(
                    f"frame {frame.frame_index}, object {item.object_id}: its prompt of {points} "
                    f"points would cost the engine {cost} as one addPoints; at most {max_cost} "
                    "(each root field 1, each engine call 4 more, each point 4, each frame 8)"
                )


def file_cost(size: int) -> int:
    """What reading an annotation file of ``size`` bytes costs."""
    return 1 + math.ceil(size / FILE_BYTES)
