"""The segmentation app's part of the root GraphQL schema."""

from __future__ import annotations

import graphene

from segmentation.graphql.consent import ConsentMutations
from segmentation.graphql.ping import PingInput, Pong, resolve_ping
from segmentation.graphql.sessions import SessionMutations
from segmentation.graphql.uploads import UploadMutations
from segmentation.graphql.videos import VideoQueries


class Queries(VideoQueries, graphene.ObjectType):
    """Read operations of the segmentation service."""

    ping = graphene.Field(
        Pong,
        required=True,
        input=PingInput(required=True, description="The session to ping."),
        description="Renew a session's idle timeout and report whether it is still alive.",
        resolver=resolve_ping,
    )


class Mutations(SessionMutations, UploadMutations, ConsentMutations, graphene.ObjectType):
    """Write operations of the segmentation service."""
