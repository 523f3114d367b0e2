from __future__ import annotations

from django.apps import AppConfig

from core.edge_registry import (
    StartupPhase,
    asgi_routes_register,
    background_task_register,
    shutdown_hook_register,
    startup_work_register,
)


class ChannelsAdminConfig(AppConfig):
    name = "channels_admin"
    verbose_name = "IPTV channels"

    def ready(self) -> None:
        from channels_admin.runtime import StreamRuntime, stream_runtime_install
        from channels_admin.services.guide import guide_refresh_periodically
        from channels_admin.services.playlists import playlist_ensure_loaded
        from channels_admin.services.schedule_runner import schedule_run_forever
        from channels_admin.services.status import StatusRecorder
        from channels_admin.services.stream import stream_hub_shutdown
        from channels_admin.services.viewer_links import ViewerLinkAccess

        # The runtime lies below the services; what it reports goes to the recorder given here,
        # and who may watch comes from the viewer links' access.
        stream_runtime_install(StreamRuntime(events=StatusRecorder(), access=ViewerLinkAccess()))
        # The server closes the hub's connections (the upstream's, the relay's in Redis) before
        # it stops.
        shutdown_hook_register(app=self.label, hook=stream_hub_shutdown)
        # The server runs the schedule (one process of several: the runner elects itself), and
        # refreshes the programme guide when it is due, on its event loop.
        background_task_register(app=self.label, task=schedule_run_forever)
        background_task_register(app=self.label, task=guide_refresh_periodically)
        # The server loads the playlist a fresh database lacks before the apps' other start-up
        # work, and routes the streams and the status feed to consumers before Django.
        startup_work_register(
            app=self.label, phase=StartupPhase.DATABASE, work=playlist_ensure_loaded
        )
        asgi_routes_register(app=self.label, urlconf="channels_admin.routing")
