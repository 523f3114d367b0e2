"""The root GraphQL schema, composed from each app's ``Queries`` and ``Mutations``, which the
apps register as they start (:class:`core.edge_registry.GraphQLPart`). graphene-django imports
this module by its name (``GRAPHENE["SCHEMA"]``), once the app registry is loaded."""

from __future__ import annotations

import graphene

from core.edge_registry import graphql_parts

PARTS = graphql_parts()


class Query(*(part.queries for part in PARTS), graphene.ObjectType):
    """Every read operation of the API."""


class Mutation(*(part.mutations for part in PARTS), graphene.ObjectType):
    """Every write operation of the API."""


schema = graphene.Schema(
    query=Query, mutation=Mutation, types=[kind for part in PARTS for kind in part.types]
)
