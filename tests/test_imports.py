"""The project's modules import each other without a circle: read from the source, so that an
import inside a function counts too. The layers between packages, and the Django-free packages'
freedom from Django, are import-linter's contracts (pyproject.toml, run by ``make lint``)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ["config", "edge", "core", "segmentation", "channels_admin"]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    files = (p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
    return {module_name(p): p for p in files if "migrations" not in p.parts}


def imported(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports (``from a.b import c`` counts as ``a.b.c`` where
    that is a module, else ``a.b``)."""
    found = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        found.update(name for name in names if name in modules)
    found.discard(module_name(path))
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            group.append(node)
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    # A package's __init__ importing its own modules is how packages re-export, not a circle.
    return {
        name: {m for m in imported(path, modules) if not name.startswith(m + ".")}
        for name, path in modules.items()
    }


def test_no_module_imports_itself_through_others():
    assert cycles(import_graph()) == []


def test_a_circle_is_found_where_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert cycles(graph) == [["a", "b", "c"]]


def test_benchmarks_import_nothing_from_the_tests():
    # import-linter sees packages; the benchmarks are scripts, read here
    found = [
        f"{path.name}: {alias}"
        for path in sorted((ROOT / "benchmarks").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [name.name for name in node.names]
        )
        if alias == "tests" or alias.startswith("tests.")
    ]

    assert found == []
