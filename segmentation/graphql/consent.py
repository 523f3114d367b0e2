"""Mutations for the client's consent and data: terms of service, deletion IDs."""

from __future__ import annotations

import graphene

from segmentation.services.consent import deletion_id_create, terms_accept


def resolve_create_deletion_id(root: object, info: graphene.ResolveInfo) -> str:
    return deletion_id_create(session=info.context.session).id


def resolve_accept_tos(root: object, info: graphene.ResolveInfo) -> bool:
    terms_accept(session=info.context.session)
    return True


def resolve_accept_terms_of_service(root: object, info: graphene.ResolveInfo) -> str:
    return terms_accept(session=info.context.session)


class ConsentMutations(graphene.ObjectType):
    create_deletion_id = graphene.String(
        required=True,
        description="A new ID that lets this client delete its uploads later.",
        resolver=resolve_create_deletion_id,
    )
    accept_tos = graphene.Boolean(
        required=True,
        description="Record that this client accepts the terms of service.",
        resolver=resolve_accept_tos,
    )
    accept_terms_of_service = graphene.String(
        required=True,
        description="Record that this client accepts the terms; the version accepted.",
        resolver=resolve_accept_terms_of_service,
    )
