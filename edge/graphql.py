"""The GraphQL endpoint: graphene-django's view, with typed errors and file uploads.

- A service raises a typed exception carrying a stable ``code`` (an enum, e.g.
  ``SESSION_NOT_FOUND``); here, and only here, it becomes the error's ``extensions.code``.
- Requests may follow the GraphQL multipart request specification: an ``operations`` field (the
  JSON request), a ``map`` field (which file part goes to which variable), and the file parts.
  (The size of the whole request is capped before Django reads it: ``edge/body_limit.py``.)
  A body Django's parser cannot read (a part's headers over 1,024 bytes, such as a long file
  name) is refused with 400 ``BAD_USER_INPUT``, logged in Django's one line for a 400.
- A request whose parameters have the wrong types (a query that is not a string, variables that
  are not an object) is refused with 400 ``BAD_USER_INPUT``, and JSON nested deeper than Python's
  parser goes is invalid JSON like any other, before either reaches GraphQL.
- What one request may ask for is limited: ``edge/graphql_limits.py``; what it may cost the
  engine, once it is known to be valid, too (the segmentation app's table,
  ``segmentation/graphql/cost.py``, registered in ``core/edge_registry.py``; refused with
  ``QUERY_TOO_COMPLEX``). Each client's mutations are rate-limited by what they cost, and its
  uploads by their number (``core/rate_limits.py``): over a limit, a request is answered 429
  ``RATE_LIMITED`` with ``Retry-After`` before it runs, and once a client is over its cost
  limit, before its body is even parsed. An error that says when to come back (the session's engine
  budget, ``RESOURCE_EXHAUSTED``) sets ``Retry-After`` too.
- A document that passed those limits and GraphQL's validation is kept, parsed, by its text
  (the last ``VALIDATED_DOCUMENTS`` of up to ``CACHED_QUERY_CHARS``): clients send the same few
  operations again and again, and parsing and validating one took a quarter of the server's
  time for a ``ping`` (``py-spy``), more than executing it.
"""

from __future__ import annotations

import enum
import json
import math
import threading
from collections import OrderedDict

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.http.multipartparser import MultiPartParserError
from graphene_django.views import GraphQLView, HttpError
from graphql import (
    DocumentNode,
    ExecutionResult,
    GraphQLError,
    OperationType,
    execute,
    get_operation_ast,
    parse,
    validate,
)

from core.client_address import client_address
from core.edge_registry import graphql_cost
from core.rate_limits import rate_limit_message, rate_limit_wait
from edge.graphql_limits import TOO_COMPLEX, graphql_size_errors, graphql_validation_rules

VALIDATED_DOCUMENTS = 256
CACHED_QUERY_CHARS = 20_000
RETRY_AFTER = "graphql_retry_after"  # the request's attribute: seconds, for the header


class ApiView(GraphQLView):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.validation_rules = graphql_validation_rules()

    def dispatch(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        response = super().dispatch(request, *args, **kwargs)
        retry_after = getattr(request, RETRY_AFTER, None)
        if retry_after is not None:
            response["Retry-After"] = str(retry_after)
        return response

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
        refused = _refusal(request, document, variables, operation_name)
        if refused is not None:
            return refused
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
            result = execute(
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
        waits = [
            getattr(getattr(error, "original_error", None), "retry_after", None)
            for error in result.errors or ()
        ]
        waits = [wait for wait in waits if wait is not None]
        if waits:
            setattr(request, RETRY_AFTER, math.ceil(max(waits)))
        return result

    def parse_body(self, request: HttpRequest) -> dict:
        if self.get_content_type(request) == "multipart/form-data":
            return operations_with_files(request)
        try:
            return super().parse_body(request)
        except RecursionError:
            # nested deeper than Python's parser goes: as invalid as any other bad JSON
            raise HttpError(HttpResponseBadRequest("POST body sent invalid JSON.")) from None

    @staticmethod
    def get_graphql_params(request: HttpRequest, data: dict) -> tuple:
        query, variables, operation_name, id_ = GraphQLView.get_graphql_params(request, data)
        if not isinstance(query, str | None):
            raise BadGraphQLRequest("the query must be a string")
        if not isinstance(operation_name, str | None):
            raise BadGraphQLRequest("operationName must be a string or null")
        if not isinstance(variables, dict | None):
            raise BadGraphQLRequest("variables must be a JSON object or null")
        return query, variables, operation_name, id_

    @staticmethod
    def format_error(error: Exception) -> dict:
        if isinstance(error, BadGraphQLRequest | RateLimited):
            return {"message": error.message, "extensions": {"code": error.code}}
        formatted = GraphQLView.format_error(error)
        original = (
            getattr(error, "original_error", None) if isinstance(error, GraphQLError) else None
        )
        code = getattr(original, "code", None)
        if isinstance(code, enum.Enum):
            formatted["message"] = str(original)
            formatted["extensions"] = {**formatted.get("extensions", {}), "code": code.value}
            retry_after = getattr(original, "retry_after", None)
            if retry_after is not None:
                formatted["extensions"]["retryAfter"] = math.ceil(retry_after)
        return formatted


def operations_with_files(request: HttpRequest) -> dict:
    """The ``operations`` of a multipart request, with each mapped file put in its place."""
    try:
        form = request.POST
    except MultiPartParserError as error:
        # Django's parser refuses a part's headers over 1,024 bytes (a long file name) and
        # malformed bodies; Django would log each with its traceback (4.8 KB) and answer a page.
        raise BadMultipartRequest(f"the multipart body cannot be read: {error}") from None
    try:
        operations = json.loads(form["operations"])
        mapping = json.loads(form["map"])
    except KeyError as missing:
        raise BadMultipartRequest(
            f"a multipart GraphQL request needs the field {missing}"
        ) from None
    except (ValueError, RecursionError):
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


class BadGraphQLRequest(HttpError):
    """A request the endpoint cannot read as a GraphQL request: answered with 400."""

    code = "BAD_USER_INPUT"

    def __init__(self, message: str) -> None:
        super().__init__(HttpResponseBadRequest(), message)


class BadMultipartRequest(BadGraphQLRequest):
    """A multipart request that does not follow the specification."""


class RateLimited(HttpError):
    """A client over its rate limit: answered with 429 and ``Retry-After``."""

    code = "RATE_LIMITED"

    def __init__(self, what: str, wait: int) -> None:
        response = HttpResponse(status=429)
        response["Retry-After"] = str(wait)
        super().__init__(response, rate_limit_message(what, wait))


def _refusal(
    request: HttpRequest,
    document: DocumentNode,
    variables: dict | None,
    operation_name: str | None,
) -> ExecutionResult | None:
    """Why the valid document is not run now: its client is over a rate limit (raised as
    :class:`RateLimited`), or it would cost the engine too much. ``None`` if it runs."""
    operation = get_operation_ast(document, operation_name)
    table = graphql_cost()  # the segmentation app's (core/edge_registry.py)
    cost = table.cost(document, operation_name, variables)
    if operation is not None and operation.operation == OperationType.MUTATION:
        address = client_address(request)
        # what it would cost counts, refused or not: a client that sends work over the limit
        # again and again soon waits out the window
        wait = rate_limit_wait(
            address=address, kind="cost", rate=settings.RATE_LIMIT_COST, weight=max(1, cost)
        )
        if wait is not None and cost <= settings.GRAPHQL_MAX_COST:
            raise RateLimited("work", wait)
        if table.uploads(document, operation_name):
            wait = rate_limit_wait(
                address=address, kind="uploads", rate=settings.RATE_LIMIT_UPLOADS
            )
            if wait is not None:
                raise RateLimited("uploads", wait)
    if cost <= settings.GRAPHQL_MAX_COST:
        return None
    name = f"'{operation.name.value}'" if operation and operation.name else "the operation"
    message = (
        f"{name} would cost the engine {cost}; at most {settings.GRAPHQL_MAX_COST} "
        "(each root field 1, each engine call 4 more, each point 4, each frame 8)"
    )
    return ExecutionResult(
        data=None, errors=[GraphQLError(message, extensions={"code": TOO_COMPLEX})]
    )


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
