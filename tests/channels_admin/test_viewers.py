"""Leaving ``/ts`` (services/viewers.py) after the server shut its hub down starts no new hub
(that a viewer who leaves is no longer counted, test_stream_server.py shows on the real server)."""

from __future__ import annotations

from channels_admin.runtime import stream_runtime
from channels_admin.services.viewers import viewer_leave
from channels_admin.streaming.subscription import Subscription


async def test_a_viewer_leaving_after_a_shutdown_starts_no_hub():
    # given a process whose hub was shut down (as at a server's stop, viewers still connected)
    runtime = stream_runtime()
    await runtime.close()

    # when a viewer's connection ends
    await viewer_leave(subscription=Subscription(1024))

    # then no hub runs: building one would have opened the upstream connection again
    assert runtime.running_hub is None
