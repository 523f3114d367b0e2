"""``Server-Timing`` response headers: where a request's time went, for browsers' developer
tools and for the API benchmark (which subtracts the engine's time from the round trip)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

ATTRIBUTE = "server_timings"


def server_timing_add(request: HttpRequest, name: str, seconds: float) -> None:
    timings = getattr(request, ATTRIBUTE, None)
    if timings is None:
        timings = {}
        setattr(request, ATTRIBUTE, timings)
    timings[name] = timings.get(name, 0.0) + seconds


class ServerTimingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        timings = getattr(request, ATTRIBUTE, None)
        if timings:
            response["Server-Timing"] = ", ".join(
                f"{name};dur={seconds * 1000:.1f}" for name, seconds in timings.items()
            )
        return response
