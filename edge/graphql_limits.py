"""What one GraphQL request may ask for, checked before anything runs.

- Depth: graphene's depth limit (``GRAPHQL_MAX_DEPTH``); introspection fields do not count.
- Size: the fields the operation selects once its fragments are expanded, each alias counting
  again (``GRAPHQL_MAX_FIELDS``), and the fields at its root (``GRAPHQL_MAX_ROOT_FIELDS``), so that
  one request cannot ask for a hundred ``addPoints`` under aliases. Introspection fields do not
  count here either: ``GRAPHQL_INTROSPECTION=0`` turns introspection off altogether (GraphiQL then
  cannot read the schema; ``schema.graphql`` holds it).
- Batches: the endpoint takes one operation per request (a JSON list is refused).

- Tokens: a document of more than ``GRAPHQL_MAX_TOKENS`` is not parsed.

The size is checked first, alone, and in time linear in the document: GraphQL's own rules and
graphene's depth limit expand fragments wherever they are spread, without remembering them, so a
few hundred bytes of fragments spreading each other twice can keep them busy for ever. Fragment
cycles are refused with the size (GraphQL's own ``NoFragmentCyclesRule``, linear too): graphene's
depth limit follows a cycle until Python's stack runs out, and runs before GraphQL's rule would
have refused it. Refusals are GraphQL errors, answered with status 400; the size limits carry
``extensions.code`` ``QUERY_TOO_COMPLEX``.
"""

from __future__ import annotations

from django.conf import settings
from graphene.validation import DisableIntrospection, depth_limit_validator
from graphql import (
    ASTValidationRule,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSchema,
    InlineFragmentNode,
    NoFragmentCyclesRule,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationRule,
    parse,
    specified_rules,
    validate,
)

TOO_COMPLEX = "QUERY_TOO_COMPLEX"


def graphql_size_errors(schema: GraphQLSchema, query: str) -> list[GraphQLError]:
    """Why the query is too large to validate in full (its tokens, fields or root fields), or
    cannot be (its fragments spread each other in a cycle); an empty list if neither. Syntax
    errors come back as the parser's error."""
    try:
        document = parse(query, max_tokens=settings.GRAPHQL_MAX_TOKENS)
    except GraphQLError as error:
        return [error]
    rule = size_limit(
        max_fields=settings.GRAPHQL_MAX_FIELDS, max_root_fields=settings.GRAPHQL_MAX_ROOT_FIELDS
    )
    return validate(schema, document, [NoFragmentCyclesRule, rule])


def graphql_validation_rules() -> tuple[type[ASTValidationRule], ...]:
    """GraphQL's own rules, the depth limit, and no introspection if the settings say so; for
    documents that passed :func:`graphql_size_errors`."""
    rules = [*specified_rules, depth_limit_validator(max_depth=settings.GRAPHQL_MAX_DEPTH)]
    if not settings.GRAPHQL_INTROSPECTION:
        rules.append(DisableIntrospection)
    return tuple(rules)


def size_limit(*, max_fields: int, max_root_fields: int) -> type[ValidationRule]:
    class SizeLimit(ValidationRule):
        def enter_operation_definition(self, node: OperationDefinitionNode, *_: object) -> None:
            fragments = {
                definition.name.value: definition
                for definition in self.context.document.definitions
                if isinstance(definition, FragmentDefinitionNode)
            }
            counter = _FieldCounter(fragments)
            name = f"'{node.name.value}'" if node.name else "the operation"
            roots = counter.count(node.selection_set, depth=1)
            if roots > max_root_fields:
                self._refuse(f"{name} has {roots} root fields; at most {max_root_fields}", node)
                return
            fields = counter.count(node.selection_set)
            if fields > max_fields:
                self._refuse(f"{name} selects {fields} fields; at most {max_fields}", node)

        def _refuse(self, message: str, node: OperationDefinitionNode) -> None:
            self.report_error(GraphQLError(message, node, extensions={"code": TOO_COMPLEX}))

    return SizeLimit


class _FieldCounter:
    """Fields of a selection set with fragments expanded; each fragment is counted once and
    remembered, so fragments that spread each other many times cost no more than their text."""

    def __init__(self, fragments: dict[str, FragmentDefinitionNode]) -> None:
        self._fragments = fragments
        self._known: dict[tuple[str, int | None], int] = {}
        self._open: set[str] = set()  # fragments being counted: a cycle (refused elsewhere)

    def count(self, selection_set: SelectionSetNode | None, *, depth: int | None = None) -> int:
        if selection_set is None or depth == 0:
            return 0
        below = None if depth is None else depth - 1
        total = 0
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                if not selection.name.value.startswith("__"):
                    total += 1 + self.count(selection.selection_set, depth=below)
            elif isinstance(selection, InlineFragmentNode):
                total += self.count(selection.selection_set, depth=depth)
            elif isinstance(selection, FragmentSpreadNode):
                total += self._fragment(selection.name.value, depth)
        return total

    def _fragment(self, name: str, depth: int | None) -> int:
        fragment = self._fragments.get(name)
        if fragment is None or name in self._open:
            return 0
        key = (name, depth)
        if key not in self._known:
            self._open.add(name)
            self._known[key] = self.count(fragment.selection_set, depth=depth)
            self._open.discard(name)
        return self._known[key]
