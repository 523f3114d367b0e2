"""What the HTTP edge (``edge/``) needs from the apps, which each app registers in its
``AppConfig.ready()``: so the edge imports no app, and no app imports the edge.

- the GraphQL cost table (:class:`GraphQLCost`): what an operation would cost the engine, and
  whether it uploads, for the endpoint's limits (``edge/graphql.py``);
- health fields: what ``/healthz`` reports besides its status and version (the engine, what
  answers, and why it was chosen);
- shutdown hooks: what the server awaits before it stops (the channel hub's connections);
- background tasks: what the server runs for as long as it serves, started once it runs and
  cancelled as it stops, before the shutdown hooks (the programme guide's refresh, the channel
  schedule's runner);
- start-up work (:class:`StartupPhase`): what the ASGI application does once as it is built,
  before it serves (the playlist a fresh database lacks, the engine);
- ASGI routes: the URL module of an app's consumers, routed before Django (the channel admin's
  streams and status feed);
- GraphQL parts (:class:`GraphQLPart`): each app's ``Queries``, ``Mutations`` and extra types,
  which ``edge/schema.py`` composes into the root schema;
- body caps (:class:`BodyCap`): paths whose request bodies have a cap of their own, and the
  refusal in those paths' own error format (the segmentation app's annotation files).

It lives in ``core/``, below both the edge and the apps, so that each reaches it downward.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

HealthFields = Callable[[], Mapping[str, Any]]
ShutdownHook = Callable[[], Awaitable[None]]
BackgroundTask = Callable[[], Awaitable[None]]
StartupWork = Callable[[], None]


class StartupPhase(enum.Enum):
    """When a piece of start-up work runs: every app's ``DATABASE`` work before any app's
    ``PROCESS`` work, each phase in the order the apps registered it."""

    DATABASE = "database"  # what a fresh database lacks (the playlist)
    PROCESS = "process"  # this process's own resources (the engine), once the data is there


@dataclass(frozen=True)
class GraphQLPart:
    """An app's part of the root GraphQL schema: its ``Queries`` and ``Mutations`` object types,
    and the types no field reaches that the schema must still hold."""

    queries: type
    mutations: type
    types: tuple[type, ...] = ()


@dataclass(frozen=True)
class BodyCap:
    """Request bodies at the paths ``paths`` matches whole take at most ``max_bytes()`` bytes
    (read as each request comes, so that settings changed at run time count); a body of
    ``size`` bytes over it is answered 413 with ``refusal(size)`` as its JSON."""

    paths: re.Pattern[str]
    max_bytes: Callable[[], int]
    refusal: Callable[[int], Mapping[str, Any]]


@dataclass(frozen=True)
class GraphQLCost:
    """``cost(document, operation_name, variables)``: what the operation would cost the engine;
    ``uploads(document, operation_name)``: whether it uploads (counted against its own limit)."""

    cost: Callable[[Any, str | None, dict | None], int]
    uploads: Callable[[Any, str | None], bool]


FREE = GraphQLCost(cost=lambda *_: 0, uploads=lambda *_: False)

_graphql_cost: GraphQLCost = FREE
_health_fields: dict[str, HealthFields] = {}
_shutdown_hooks: dict[str, ShutdownHook] = {}
_background_tasks: dict[tuple[str, str], BackgroundTask] = {}
_startup_work: dict[tuple[StartupPhase, str], StartupWork] = {}
_asgi_routes: dict[str, str] = {}
_graphql_parts: dict[str, GraphQLPart] = {}
_body_caps: dict[str, BodyCap] = {}


def graphql_cost_register(cost: GraphQLCost) -> None:
    global _graphql_cost
    _graphql_cost = cost


def graphql_cost() -> GraphQLCost:
    """The registered cost table; with none, every operation is free and none uploads."""
    return _graphql_cost


def health_fields_register(*, app: str, fields: HealthFields) -> None:
    _health_fields[app] = fields


def health_fields() -> dict[str, Any]:
    """Every app's health fields, in the order the apps registered them."""
    return {name: value for fields in _health_fields.values() for name, value in fields().items()}


def shutdown_hook_register(*, app: str, hook: ShutdownHook) -> None:
    _shutdown_hooks[app] = hook


def shutdown_hooks() -> list[ShutdownHook]:
    return list(_shutdown_hooks.values())


def background_task_register(*, app: str, task: BackgroundTask) -> None:
    """``task()`` runs on the server's event loop from its start until it is cancelled as the
    server stops (not in ``manage.py`` commands or tests that build no server); an app may
    register several, each once."""
    _background_tasks[app, task.__qualname__] = task


def background_tasks() -> list[BackgroundTask]:
    return list(_background_tasks.values())


def startup_work_register(*, app: str, phase: StartupPhase, work: StartupWork) -> None:
    _startup_work[phase, app] = work


def startup_work() -> list[StartupWork]:
    """Every app's start-up work: the ``DATABASE`` phase's, then the ``PROCESS`` phase's."""
    return [
        work
        for phase in StartupPhase
        for (work_phase, _app), work in _startup_work.items()
        if work_phase is phase
    ]


def asgi_routes_register(*, app: str, urlconf: str) -> None:
    """``urlconf``, a module's dotted path, holds the app's ``http_urlpatterns`` and
    ``websocket_urlpatterns`` of consumers; named, not imported, as Django's ``include()``
    names a URL module, so that only the ASGI application imports the consumers."""
    _asgi_routes[app] = urlconf


def asgi_routes() -> list[str]:
    return list(_asgi_routes.values())


def graphql_part_register(*, app: str, part: GraphQLPart) -> None:
    _graphql_parts[app] = part


def graphql_parts() -> list[GraphQLPart]:
    """Every app's part of the root schema, in the order the apps registered them."""
    return list(_graphql_parts.values())


def body_cap_register(*, app: str, cap: BodyCap) -> None:
    _body_caps[app] = cap


def body_cap_of(path: str) -> BodyCap | None:
    """The registered cap whose paths match ``path``, if any (else the edge's own)."""
    return next((cap for cap in _body_caps.values() if cap.paths.fullmatch(path)), None)
