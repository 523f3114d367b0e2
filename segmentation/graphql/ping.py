"""``ping``: the client's keep-alive for a session."""

from __future__ import annotations

import graphene

from segmentation.services.sessions import session_ping


class PingInput(graphene.InputObjectType):
    """Identifies the session to keep alive."""

    session_id = graphene.String(required=True, description="The session to keep alive.")


class Pong(graphene.ObjectType):
    """Whether the pinged session is alive."""

    success = graphene.Boolean(
        required=True, description="True while the session lives; false once closed or expired."
    )


def resolve_ping(root: object, info: graphene.ResolveInfo, input: PingInput) -> Pong:
    return Pong(success=session_ping(session_id=input.session_id))
