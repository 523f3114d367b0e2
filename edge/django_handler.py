"""Django's ASGI handler, told of a client's disconnect without an exception.

Django 5.2's handler runs the view in one task and waits for the client's ``http.disconnect`` in
another, which raises ``RequestAborted`` when it comes; the handler catches that and cancels the
view if it is still running. daphne sends the disconnect as soon as the answer is out, so for
nearly every request the waiting task ends in that exception, and the exception's traceback
holds the handler's frame, whose list of the two tasks holds the exception again. The request
and its response are then garbage only the cyclic collector frees, which this server runs seldom
(``config/asgi.py``): an export's whole answer (8 MB of COCO JSON) stayed in the process until
then, about 10 MB a round of an import and the three exports of a 7 MB file.

Here the waiting task returns instead. The handler treats a waiting task that ended either way
alike, so no view runs on after its client went (the hang-up tests of
``tests/segmentation/test_annotation_work_limits.py`` say so, and would fail on a Django that
cancels a view only when the task raises).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import django
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler

Receive = Callable[[], Awaitable[dict[str, Any]]]


class DisconnectHandler(ASGIHandler):
    """Django's ASGI handler, its wait for the client's disconnect ending without an
    exception."""

    async def listen_for_disconnect(self, receive: Receive) -> None:
        try:
            await super().listen_for_disconnect(receive)
        except RequestAborted:
            return  # dropped here, where nothing holds it: the client went


def django_asgi_application() -> DisconnectHandler:
    """Set Django up and return its ASGI application (as ``get_asgi_application`` does)."""
    django.setup(set_prefix=False)
    return DisconnectHandler()
