"""The README and docs/ point at things that exist: every relative link and anchor resolves, and
every ``manage.py`` command and ``make`` target they name is there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import get_commands

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)
MANAGE = re.compile(r"manage\.py ([a-z0-9_]+)")
MAKE = re.compile(r"(?:^|[\s(;&|`])make ([a-z][a-z-]*)", re.MULTILINE)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = CODE.sub("", page.read_text())
    return {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][a-z-]*):", makefile, re.MULTILINE))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(CODE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (
            anchor and linked.suffix == ".md" and anchor not in anchors(linked)
        ):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_command_and_target_named_exists(page: Path) -> None:
    code = "\n".join(CODE.findall(page.read_text()))
    commands = set(MANAGE.findall(code)) - set(get_commands())
    targets = set(MAKE.findall(code)) - make_targets()
    assert (commands, targets) == (set(), set())


# docs/architecture.md's map: a heading per package (### `segmentation/services/`), then a line
# per module (- `sessions.py`: ...). The pages' scripts are modules too (ES modules the browser
# loads, - `timeline.js`: ...), under a heading per static folder.
PACKAGE_HEADING = re.compile(r"^### `([a-z0-9_/]+)/`", re.MULTILINE)
MODULE_LINE = re.compile(r"^- `([a-z0-9_]+\.(?:py|js))`", re.MULTILINE)
MAPPED = ["config", "edge", "core", "segmentation", "channels_admin", "loopback_fakes"]


def architecture_map() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set()
    headings = list(PACKAGE_HEADING.finditer(text))
    for heading, following in zip(headings, [*headings[1:], None], strict=True):
        section = text[heading.end() : following.start() if following else len(text)]
        named.update(f"{heading[1]}/{module}" for module in MODULE_LINE.findall(section))
    return named


def app_modules() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for app in MAPPED
        for path in (ROOT / app).rglob("*.py")
        if path.name != "__init__.py" and not {"migrations", "commands"} & set(path.parts)
    }


def page_scripts() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for app in MAPPED
        for path in (ROOT / app / "static").rglob("*.js")
    }


def test_the_architecture_map_names_every_module_and_no_other():
    named, modules = architecture_map(), app_modules() | page_scripts()

    assert (sorted(modules - named), sorted(named - modules)) == ([], [])
