"""The root GraphQL schema, composed from each app's ``Queries`` and ``Mutations``."""

from __future__ import annotations

import graphene

from segmentation.graphql.schema import Mutations as SegmentationMutations
from segmentation.graphql.schema import Queries as SegmentationQueries
from segmentation.graphql.types import Video


class Query(SegmentationQueries, graphene.ObjectType):
    """Every read operation of the API."""


class Mutation(SegmentationMutations, graphene.ObjectType):
    """Every write operation of the API."""


schema = graphene.Schema(query=Query, mutation=Mutation, types=[Video])
