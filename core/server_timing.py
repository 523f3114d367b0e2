"""``Server-Timing`` response headers: where a request's time went, for browsers' developer
tools and for the API benchmark (which subtracts the engine's time from the round trip)."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

ATTRIBUTE = "server_timings"


def server_timing_add(request: HttpRequest, name: str, seconds: float) -> None:
    timings = getattr(request, ATTRIBUTE, None)
    if timings is None:
        timings = {}
        setattr(request, ATTRIBUTE, timings)
    timings[name] = timings.get(name, 0.0) + seconds


class ServerTimingMiddleware:
    """Both sync and async, so async views (the channel admin's) stay on the server's loop."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest):
        if self.is_async:
            return self._respond_async(request)
        return self._with_header(request, self.get_response(request))

    async def _respond_async(self, request: HttpRequest) -> HttpResponse:
        return self._with_header(request, await self.get_response(request))

    @staticmethod
    def _with_header(request: HttpRequest, response: HttpResponse) -> HttpResponse:
        timings = getattr(request, ATTRIBUTE, None)
        if timings:
            response["Server-Timing"] = ", ".join(
                f"{name};dur={seconds * 1000:.1f}" for name, seconds in timings.items()
            )
        return response
