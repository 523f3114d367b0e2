from __future__ import annotations

from django.apps import AppConfig

from core.edge_registry import shutdown_hook_register


class ChannelsAdminConfig(AppConfig):
    name = "channels_admin"
    verbose_name = "IPTV channels"

    def ready(self) -> None:
        from channels_admin.runtime import StreamRuntime, stream_runtime_install
        from channels_admin.services.status import StatusRecorder
        from channels_admin.services.stream import stream_hub_shutdown

        # The runtime lies below the services; what it reports goes to the recorder given here.
        stream_runtime_install(StreamRuntime(events=StatusRecorder()))
        # The server closes the hub's connections (the upstream's, the relay's in Redis) before
        # it stops.
        shutdown_hook_register(app=self.label, hook=stream_hub_shutdown)
