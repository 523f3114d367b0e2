"""What one GraphQL request would cost the engine, reckoned from the document and its variables
before anything runs.

The size limits (edge/graphql_limits.py) count fields; they cannot see that one ``addPoints``
with a hundred points in its variables takes the engine seconds, or that ten of them under
aliases on ten frames take ten times that. The cost counts what the engine's time grows with:

- each root field of the operation: 1, each alias again;
- each field that runs the engine: :data:`ENGINE_CALL` more;
- each point of an ``addPoints``: :data:`POINT` (the classic engine's cut grows with the
  points: about 0.1 s each, for points spread over the frame);
- each frame the request touches (``frameIndex``), once: :data:`FRAME` (a frame new to the
  session is decoded and, for SAM 2, run through the image encoder);
- opening a session (a video to decode) or an upload: :data:`OPEN`.

A person's click is 17 (one root field, one engine call, one point, one frame); the default
budget (``GRAPHQL_MAX_COST``, 100) admits a click of up to 21 points, or several objects'
clicks on a few frames. A request over it is refused before any of it runs.

The units, and what the plain endpoints cost in them, are
``segmentation/services/engine_prices.py``.
"""

from __future__ import annotations

from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    value_from_ast_untyped,
)

from segmentation.services.engine_prices import ENGINE_CALL, FRAME, OPEN, POINT

ENGINE_FIELDS = frozenset({"addPoints", "clearPointsInFrame", "removeObject"})
OPENING_FIELDS = frozenset(
    {"startSession", "uploadVideo", "uploadSharedVideo", "uploadAnnotations"}
)
UPLOAD_FIELDS = OPENING_FIELDS - {"startSession"}


def operation_cost(
    document: DocumentNode, operation_name: str | None, variables: dict[str, Any] | None
) -> int:
    """The cost of the operation the request runs (0 if the document names none)."""
    operation = _operation(document, operation_name)
    if operation is None:
        return 0
    variables = variables if isinstance(variables, dict) else {}
    cost = 0
    frames: set[object] = set()
    for field in _root_fields(operation.selection_set, _fragments(document), set()):
        name = field.name.value
        cost += 1
        if name in OPENING_FIELDS:
            cost += OPEN
        if name not in ENGINE_FIELDS:
            continue
        cost += ENGINE_CALL
        arguments = _input(field, variables)
        points = arguments.get("points")
        if isinstance(points, list):
            cost += POINT * len(points)
        frame = arguments.get("frameIndex")
        if isinstance(frame, int | float | str):
            frames.add(frame)
    return cost + FRAME * len(frames)


def root_field_names(document: DocumentNode, operation_name: str | None) -> list[str]:
    """The names of the fields at the root of the operation the request runs, fragments spread
    in, once per alias."""
    operation = _operation(document, operation_name)
    if operation is None:
        return []
    return [
        field.name.value
        for field in _root_fields(operation.selection_set, _fragments(document), set())
    ]


def operation_uploads(document: DocumentNode, operation_name: str | None) -> bool:
    """Whether the operation uploads a video or annotations (``RATE_LIMIT_UPLOADS`` counts it)."""
    return bool(UPLOAD_FIELDS.intersection(root_field_names(document, operation_name)))


def _fragments(document: DocumentNode) -> dict[str, FragmentDefinitionNode]:
    return {
        definition.name.value: definition
        for definition in document.definitions
        if isinstance(definition, FragmentDefinitionNode)
    }


def _operation(
    document: DocumentNode, operation_name: str | None
) -> OperationDefinitionNode | None:
    operations = [
        definition
        for definition in document.definitions
        if isinstance(definition, OperationDefinitionNode)
    ]
    if operation_name is None:
        return operations[0] if len(operations) == 1 else None
    named = [o for o in operations if o.name is not None and o.name.value == operation_name]
    return named[0] if named else None


def _root_fields(
    selection_set: SelectionSetNode,
    fragments: dict[str, FragmentDefinitionNode],
    open_fragments: set[str],
) -> list[FieldNode]:
    """The fields at the operation's root, fragments spread in (each alias a field of its own)."""
    fields: list[FieldNode] = []
    for selection in selection_set.selections:
        if isinstance(selection, FieldNode):
            fields.append(selection)
        elif isinstance(selection, InlineFragmentNode):
            fields += _root_fields(selection.selection_set, fragments, open_fragments)
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            fragment = fragments.get(name)
            if fragment is not None and name not in open_fragments:
                fields += _root_fields(fragment.selection_set, fragments, open_fragments | {name})
    return fields


def _input(field: FieldNode, variables: dict[str, Any]) -> dict[str, Any]:
    """The field's ``input`` argument as plain values, variables put in."""
    for argument in field.arguments:
        if argument.name.value == "input":
            value = value_from_ast_untyped(argument.value, variables)
            return value if isinstance(value, dict) else {}
    return {}
