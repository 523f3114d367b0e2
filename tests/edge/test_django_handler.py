"""An answered request's handling is freed at once, not by the cyclic collector
(``edge/django_handler.py``).

The application is told of the disconnect as soon as the answer is out, as daphne does; with
the cyclic collector off, no frame of Django's ``handle`` (which holds the request and its
answer) may be alive after the handler returns. Django's own handler leaves each in a reference
cycle through the ``RequestAborted`` it catches (this test fails with it).
"""

from __future__ import annotations

import asyncio
import gc
import types
from collections.abc import Iterator

import pytest
from django.core.handlers.asgi import ASGIHandler

from edge.django_handler import DisconnectHandler

SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0"},
    "http_version": "1.1",
    "method": "GET",
    "scheme": "http",
    "path": "/nowhere",
    "raw_path": b"/nowhere",
    "query_string": b"",
    "headers": [(b"host", b"testserver")],
    "client": ("127.0.0.1", 40000),
    "server": ("127.0.0.1", 8000),
}


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def handlings_alive() -> int:
    """The frames of Django's ``ASGIHandler.handle`` alive: each holds its request and answer."""
    return sum(
        isinstance(thing, types.FrameType) and thing.f_code is ASGIHandler.handle.__code__
        for thing in gc.get_objects()
    )


async def test_an_answered_requests_handling_is_freed_without_the_cyclic_collector(
    collector_off,
) -> None:
    # given a server that says the client is gone once the answer's last byte is out
    answered = asyncio.Event()
    sent: list[dict] = []
    messages = iter([{"type": "http.request", "body": b"", "more_body": False}])

    async def receive() -> dict:
        message = next(messages, None)
        if message is None:
            await answered.wait()
            return {"type": "http.disconnect"}
        return message

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            answered.set()

    alive = handlings_alive()

    # when a request is answered
    await DisconnectHandler()(SCOPE, receive, send)

    # then it was answered, and nothing holds it any more
    assert sent[0]["status"] == 404
    assert handlings_alive() == alive
