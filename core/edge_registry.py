"""What the HTTP edge (``edge/``) needs from the apps, which each app registers in its
``AppConfig.ready()``: so the edge imports no app, and no app imports the edge.

- the GraphQL cost table (:class:`GraphQLCost`): what an operation would cost the engine, and
  whether it uploads, for the endpoint's limits (``edge/graphql.py``);
- health fields: what ``/healthz`` reports besides its status and version (the engine, what
  answers, and why it was chosen);
- shutdown hooks: what the server awaits before it stops (the channel hub's connections).

It lives in ``core/``, below both the edge and the apps, so that each reaches it downward.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

HealthFields = Callable[[], Mapping[str, Any]]
ShutdownHook = Callable[[], Awaitable[None]]


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
