"""Why a viewer may not have the stream now: the answer a consumer gives instead of it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """Why a viewer may not join now (the answer's text), the HTTP status it is answered
    with, and in how many seconds to try again (None: asking again will not help)."""

    reason: str
    retry_after_sec: int | None
    status: int = 503
