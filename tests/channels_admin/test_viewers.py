"""Leaving ``/ts`` (services/viewers.py): a viewer that leaves is no longer counted, and one that
leaves after the server shut its hub down does not start a new hub."""

from __future__ import annotations

import pytest

from channels_admin.runtime import stream_runtime
from channels_admin.services.viewers import viewer_leave
from channels_admin.streaming.subscription import Subscription


@pytest.mark.django_db(transaction=True)
async def test_a_viewer_that_leaves_is_no_longer_counted():
    # given the process's hub (no channel selected) with one viewer
    runtime = stream_runtime()
    hub = await runtime.hub()
    subscription = hub.subscribe()
    try:
        # when the viewer leaves
        await viewer_leave(subscription=subscription)

        # then the hub counts none
        assert hub.viewers == 0
    finally:
        await runtime.close()


async def test_a_viewer_leaving_after_a_shutdown_starts_no_hub():
    # given a process whose hub was shut down (as at a server's stop, viewers still connected)
    runtime = stream_runtime()
    await runtime.close()

    # when a viewer's connection ends
    await viewer_leave(subscription=Subscription(1024))

    # then no hub runs: building one would have opened the upstream connection again
    assert runtime.running_hub is None
