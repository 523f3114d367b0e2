from __future__ import annotations

from django.apps import AppConfig


class ChannelsAdminConfig(AppConfig):
    name = "channels_admin"
    verbose_name = "IPTV channels"

    def ready(self) -> None:
        # The runtime lies below the services; what it reports goes to the recorder given here.
        from channels_admin.runtime import StreamRuntime, stream_runtime_install
        from channels_admin.services.status import StatusRecorder

        stream_runtime_install(StreamRuntime(events=StatusRecorder()))
