"""This process's stream, ended for a server shutdown: its upstream connection and viewers."""

from __future__ import annotations

from channels_admin.runtime import stream_runtime


async def stream_hub_shutdown() -> None:
    """Close this process's upstream connection and end its viewers (server shutdown, tests)."""
    await stream_runtime().close()
