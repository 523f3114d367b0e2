"""The GraphQL endpoint: graphene-django's view, with typed errors and file uploads.

- A service raises a typed exception carrying a stable ``code`` (an enum, e.g.
  ``SESSION_NOT_FOUND``); here, and only here, it becomes the error's ``extensions.code``.
- Requests may follow the GraphQL multipart request specification: an ``operations`` field (the
  JSON request), a ``map`` field (which file part goes to which variable), and the file parts.
  (The size of the whole request is capped before Django reads it: ``config/body_limit.py``.)
- What one request may ask for is limited: ``config/graphql_limits.py``.
"""

from __future__ import annotations

import enum
import json

from django.http import HttpRequest, HttpResponseBadRequest
from graphene_django.views import GraphQLView, HttpError
from graphql import ExecutionResult, GraphQLError

from config.graphql_limits import graphql_size_errors, graphql_validation_rules


class ApiView(GraphQLView):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.validation_rules = graphql_validation_rules()

    def execute_graphql_request(
        self,
        request: HttpRequest,
        data: dict,
        query: str | None,
        variables: dict | None,
        operation_name: str | None,
        show_graphiql: bool = False,
    ) -> ExecutionResult | None:
        if query:
            refused = graphql_size_errors(self.schema.graphql_schema, query)
            if refused:
                return ExecutionResult(data=None, errors=refused)
        return super().execute_graphql_request(
            request, data, query, variables, operation_name, show_graphiql
        )

    def parse_body(self, request: HttpRequest) -> dict:
        if self.get_content_type(request) == "multipart/form-data":
            return operations_with_files(request)
        return super().parse_body(request)

    @staticmethod
    def format_error(error: Exception) -> dict:
        if isinstance(error, BadMultipartRequest):
            return {"message": error.message, "extensions": {"code": error.code}}
        formatted = GraphQLView.format_error(error)
        original = (
            getattr(error, "original_error", None) if isinstance(error, GraphQLError) else None
        )
        code = getattr(original, "code", None)
        if isinstance(code, enum.Enum):
            formatted["message"] = str(original)
            formatted["extensions"] = {**formatted.get("extensions", {}), "code": code.value}
        return formatted


def operations_with_files(request: HttpRequest) -> dict:
    """The ``operations`` of a multipart request, with each mapped file put in its place."""
    try:
        operations = json.loads(request.POST["operations"])
        mapping = json.loads(request.POST["map"])
    except KeyError as missing:
        raise BadMultipartRequest(
            f"a multipart GraphQL request needs the field {missing}"
        ) from None
    except ValueError:
        raise BadMultipartRequest("the operations and map fields must be JSON") from None
    if not isinstance(operations, dict) or not isinstance(mapping, dict):
        raise BadMultipartRequest("operations must be a JSON object and map a JSON object")
    for key, paths in mapping.items():
        if key not in request.FILES:
            raise BadMultipartRequest(f"the map names a file part {key!r} that the request lacks")
        if not isinstance(paths, list):
            raise BadMultipartRequest(f"map[{key!r}] must be a list of paths")
        for path in paths:
            _place(operations, str(path), request.FILES[key])
    return operations


def _place(operations: dict, path: str, file: object) -> None:
    *parents, last = path.split(".")
    if not parents or parents[0] != "variables":
        raise BadMultipartRequest(f"a file can only go into the variables, not {path!r}")
    target: object = operations
    try:
        for step in parents:
            target = target[int(step)] if isinstance(target, list) else target[step]
        if isinstance(target, list):
            target[int(last)] = file
        elif isinstance(target, dict):
            target[last] = file
        else:
            raise TypeError
    except (KeyError, IndexError, ValueError, TypeError):
        raise BadMultipartRequest(f"the map's path {path!r} is not in the operations") from None


class BadMultipartRequest(HttpError):
    """A multipart request that does not follow the specification: answered with 400."""

    code = "BAD_USER_INPUT"

    def __init__(self, message: str) -> None:
        super().__init__(HttpResponseBadRequest(), message)
