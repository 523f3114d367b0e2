"""The pages' scripts, read as the ES modules the browser loads (no bundler checks them first):
every module they import is there, every name they import is one it exports, and the modules
import each other one way, as the Python ones do, without a circle. The annotator's page names
every module its entry reaches for the browser to fetch at once (`modulepreload`): left to find
them an import at a time, it would wait for ten round trips one after another."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

FOLDERS = sorted(ROOT.glob("*/static/*"))
IMPORT = re.compile(r"""^import\s*\{([^}]*)\}\s*from\s*"([^"]+)";""", re.MULTILINE)
EXPORT = re.compile(
    r"^export (?:async )?(?:function\*?|const|let|class) ([A-Za-z_$][\w$]*)", re.MULTILINE
)
PRELOAD = re.compile(r"""<link rel="modulepreload" href="{% static '([^']+)' %}">""")


def imports(path: Path) -> dict[Path, set[str]]:
    """The modules `path` imports, each with the names it takes from it (`a as b` is `a`)."""
    found = {}
    for names, source in IMPORT.findall(path.read_text()):
        taken = {name.split(" as ")[0].strip() for name in names.split(",") if name.strip()}
        found[(path.parent / source).resolve()] = taken
    return found


def exports(path: Path) -> set[str]:
    return set(EXPORT.findall(path.read_text()))


def reached(entry: Path) -> set[Path]:
    """The entry and every module it imports, directly or not."""
    found = set()

    def visit(path: Path) -> None:
        if path not in found:
            found.add(path)
            for source in imports(path):
                visit(source)

    visit(entry.resolve())
    return found


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_the_folders_of_page_scripts_are_found():
    assert [relative(folder) for folder in FOLDERS] == [
        "channels_admin/static/channels_admin",
        "segmentation/static/segmentation",
    ]


@pytest.mark.parametrize("folder", FOLDERS, ids=relative)
def test_every_imported_name_is_exported_by_a_module_that_is_there(folder: Path):
    missing = []
    for path in sorted(folder.glob("*.js")):
        for source, names in imports(path).items():
            if not source.is_file():
                missing.append(f"{path.name}: {relative(source)} is not there")
            else:
                missing.extend(
                    f"{path.name}: {source.name} exports no {name}"
                    for name in sorted(names - exports(source))
                )

    assert missing == []


@pytest.mark.parametrize("folder", FOLDERS, ids=relative)
def test_no_page_module_imports_itself_in_a_circle(folder: Path):
    graph = {path.resolve(): sorted(imports(path)) for path in folder.glob("*.js")}
    circles, done = [], set()

    def visit(path: Path, trail: list[Path]) -> None:
        if path in trail:
            circles.append(" -> ".join(p.name for p in [*trail[trail.index(path) :], path]))
        elif path not in done:
            for source in graph.get(path, []):
                visit(source, [*trail, path])
            done.add(path)

    for path in sorted(graph):
        visit(path, [])

    assert circles == []


def test_the_annotator_page_preloads_every_module_its_entry_reaches_and_no_other():
    template = (ROOT / "templates" / "segmentation" / "annotate.html").read_text()
    preloaded = PRELOAD.findall(template)
    entry = ROOT / "segmentation" / "static" / "segmentation" / "annotate.js"

    assert sorted(preloaded) == sorted(f"segmentation/{path.name}" for path in reached(entry))
