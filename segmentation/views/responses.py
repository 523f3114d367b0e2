"""The segmentation views' error responses: one helper each, so that their texts never drift.

A service's typed error is answered with the HTTP status its code carries, what else it says
(``details``) and, if it says when to come back, ``Retry-After`` (``segmentation/errors.py``).
"""

from __future__ import annotations

import math

from django.http import JsonResponse

from segmentation.errors import ErrorCode, SegmentationError


def refusal(error: SegmentationError) -> JsonResponse:
    """The service's error, answered with the status its code carries, what else it says
    (``details``) and, if it says when to come back, ``Retry-After``."""
    response = error_response(error.code.http_status, error.code, error.message, **error.details)
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:
        response["Retry-After"] = str(math.ceil(retry_after))
    return response


def error_response(status: int, code: ErrorCode, message: str, **details: object) -> JsonResponse:
    """``{"error": message, "code": code, **details}`` with ``status``."""
    return JsonResponse({"error": message, "code": code.value, **details}, status=status)
