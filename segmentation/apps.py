from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core.edge_registry import GraphQLCost, graphql_cost_register, health_fields_register


class SegmentationConfig(AppConfig):
    name = "segmentation"
    verbose_name = "Video segmentation"

    def ready(self) -> None:
        from segmentation.engines import EngineConfigError, engine_options
        from segmentation.graphql.cost import operation_cost, operation_uploads
        from segmentation.services.process_engine import (
            engine_chosen,
            engine_chosen_options,
            engine_health,
        )

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
        # What the HTTP edge needs from this app: what a GraphQL operation costs the engine, and
        # the engine's fields of /healthz.
        graphql_cost_register(GraphQLCost(cost=operation_cost, uploads=operation_uploads))
        health_fields_register(app=self.label, fields=engine_health)
        _session_host_wire()


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
