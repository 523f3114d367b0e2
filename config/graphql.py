"""The GraphQL endpoint: graphene-django's view, with typed errors and file uploads.

- A service raises a typed exception carrying a stable ``code`` (an enum, e.g.
  ``SESSION_NOT_FOUND``); here, and only here, it becomes the error's ``extensions.code``.
- Requests may follow the GraphQL multipart request specification: an ``operations`` field (the
  JSON request), a ``map`` field (which file part goes to which variable), and the file parts.
  (The size of the whole request is capped before Django reads it: ``config/body_limit.py``.)
- What one request may ask for is limited: ``config/graphql_limits.py``.
- A document that passed those limits and GraphQL's validation is kept, parsed, by its text
  (the last ``VALIDATED_DOCUMENTS`` of up to ``CACHED_QUERY_CHARS``): clients send the same few
  operations again and again, and parsing and validating one took a quarter of the server's
  time for a ``ping`` (``py-spy``), more than executing it.
"""

from __future__ import annotations

import enum
import json
import threading
from collections import OrderedDict

from django.conf import settings
from django.http import HttpRequest, HttpResponseBadRequest
from graphene_django.views import GraphQLView, HttpError
from graphql import DocumentNode, ExecutionResult, GraphQLError, execute, parse, validate

from config.graphql_limits import graphql_size_errors, graphql_validation_rules

VALIDATED_DOCUMENTS = 256
CACHED_QUERY_CHARS = 20_000


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
        key = (query, _limits())
        document = _validated_documents.get(key) if query else None
        if document is None and query:
            refused = graphql_size_errors(self.schema.graphql_schema, query)
            if refused:
                return ExecutionResult(data=None, errors=refused)
        if not query or request.method != "POST":  # GraphiQL's page, GET's own rules
            return super().execute_graphql_request(
                request, data, query, variables, operation_name, show_graphiql
            )
        if document is None:
            document = parse(query)
            errors = validate(self.schema.graphql_schema, document, self.validation_rules)
            if errors:
                return ExecutionResult(data=None, errors=errors)
            if len(query) <= CACHED_QUERY_CHARS:
                _validated_documents.put(key, document)
        return self._execute(request, document, variables, operation_name)

    def _execute(
        self,
        request: HttpRequest,
        document: DocumentNode,
        variables: dict | None,
        operation_name: str | None,
    ) -> ExecutionResult:
        """Run a document known to be valid, as graphene-django's view runs one."""
        try:
            return execute(
                self.schema.graphql_schema,
                document,
                root_value=self.get_root_value(request),
                context_value=self.get_context(request),
                variable_values=variables,
                operation_name=operation_name,
                middleware=self.get_middleware(request),
            )
        except Exception as error:  # as graphene-django's view: the error goes in the answer
            return ExecutionResult(errors=[error])

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


def _limits() -> tuple:
    """The settings a document was validated under: a document is valid for these only."""
    return (
        settings.GRAPHQL_MAX_DEPTH,
        settings.GRAPHQL_MAX_FIELDS,
        settings.GRAPHQL_MAX_ROOT_FIELDS,
        settings.GRAPHQL_MAX_TOKENS,
        settings.GRAPHQL_INTROSPECTION,
    )


class _Documents:
    """The last ``size`` validated documents, by their text and the limits they passed; safe
    across request threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._documents: OrderedDict[tuple, DocumentNode] = OrderedDict()
        self._guard = threading.Lock()

    def get(self, key: tuple) -> DocumentNode | None:
        with self._guard:
            document = self._documents.get(key)
            if document is not None:
                self._documents.move_to_end(key)
            return document

    def put(self, key: tuple, document: DocumentNode) -> None:
        with self._guard:
            self._documents[key] = document
            while len(self._documents) > self._size:
                self._documents.popitem(last=False)


_validated_documents = _Documents(VALIDATED_DOCUMENTS)
