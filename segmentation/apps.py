from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core.edge_registry import (
    GraphQLCost,
    GraphQLPart,
    StartupPhase,
    body_cap_register,
    graphql_cost_register,
    graphql_part_register,
    health_fields_register,
    startup_work_register,
)


class SegmentationConfig(AppConfig):
    name = "segmentation"
    verbose_name = "Video segmentation"

    def ready(self) -> None:
        from segmentation.engines import EngineConfigError, engine_options
        from segmentation.graphql.cost import operation_cost, operation_uploads
        from segmentation.graphql.schema import Mutations, Queries
        from segmentation.graphql.types import Video
        from segmentation.services.process_engine import (
            engine_chosen,
            engine_chosen_options,
            engine_health,
        )
        from segmentation.views.annotation_posts import ANNOTATIONS_BODY_CAP

        # The engine is chosen here (SEGMENTATION_ENGINE, or with "auto" from the models
        # folder), and a bad engine name or option stops start-up here, not at the first click.
        engine = engine_chosen().engine
        try:
            engine_options(engine, engine_chosen_options())
        except EngineConfigError as error:
            raise ImproperlyConfigured(
                f"SEGMENTATION_ENGINE={engine!r} "
                f"(options from SEGMENTATION_ENGINE_OPTIONS): {error}"
            ) from None
        # What the HTTP edge needs from this app: its part of the GraphQL schema, what an
        # operation costs the engine, the engine's fields of /healthz, the engine loaded as the
        # server starts (with the uploads being prepared), and the annotation files' cap while
        # they arrive.
        graphql_part_register(
            app=self.label, part=GraphQLPart(queries=Queries, mutations=Mutations, types=(Video,))
        )
        graphql_cost_register(GraphQLCost(cost=operation_cost, uploads=operation_uploads))
        health_fields_register(app=self.label, fields=engine_health)
        startup_work_register(app=self.label, phase=StartupPhase.PROCESS, work=_process_start)
        body_cap_register(app=self.label, cap=ANNOTATIONS_BODY_CAP)
        _session_host_wire()


def _process_start() -> None:
    """The app's start-up work in the server: the engine loaded, the uploads being prepared
    kept, those a previous run left taken up (``services/preparations.py``), and, where this
    process holds the sessions, its propagation jobs watched, those a previous run left taken
    up (``services/propagation_jobs.py``; inference workers watch theirs)."""
    from segmentation.services.preparations import preparations_keep
    from segmentation.services.process_engine import engine_start

    engine_start()
    preparations_keep()
    if not settings.SEGMENTATION_WORKERS:
        from segmentation.services.local_sessions import local_sessions

        local_sessions().jobs_watch()


def _session_host_wire() -> None:
    """Give the session services their host (``services/sessions.py``): the inference workers'
    client when ``SEGMENTATION_WORKERS`` is on, else this process's own sessions. Each is made
    on its first use; the one not chosen is not imported."""
    from segmentation.services.sessions import session_host_provide

    if settings.SEGMENTATION_WORKERS:
        from segmentation.workers.client import worker_client

        session_host_provide(worker_client)
    else:
        from segmentation.services.local_sessions import local_sessions

        session_host_provide(local_sessions)
