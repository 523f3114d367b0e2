"""The GraphQL endpoint: graphene-django's view, with the API's typed errors made visible.

A service raises a typed exception carrying a stable ``code`` (an enum, e.g. ``SESSION_NOT_FOUND``);
here, and only here, it becomes the error's ``extensions.code`` with the exception's message.
"""

from __future__ import annotations

import enum

from graphene_django.views import GraphQLView
from graphql import GraphQLError


class ApiView(GraphQLView):
    @staticmethod
    def format_error(error: Exception) -> dict:
        formatted = GraphQLView.format_error(error)
        original = (
            getattr(error, "original_error", None) if isinstance(error, GraphQLError) else None
        )
        code = getattr(original, "code", None)
        if isinstance(code, enum.Enum):
            formatted["message"] = str(original)
            formatted["extensions"] = {**formatted.get("extensions", {}), "code": code.value}
        return formatted
