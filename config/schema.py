"""The root GraphQL schema, composed from each app's ``Queries`` (and ``Mutations``)."""

from __future__ import annotations

import graphene

from segmentation.graphql.schema import Queries as SegmentationQueries


class Query(SegmentationQueries, graphene.ObjectType):
    """Every read operation of the API."""


schema = graphene.Schema(query=Query)
