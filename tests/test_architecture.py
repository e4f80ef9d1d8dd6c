"""docs/architecture.md against the tree: every module of service/ is named, every path
named exists, and every file a recipe lists exists."""

from __future__ import annotations

import re
from typing import Final

from tests.support import ROOT

PAGE: Final = (ROOT / "docs" / "architecture.md").read_text()
NAMED: Final = set(re.findall(r"`((?:service|tests|docs)/[^`<>]+?)`", PAGE)) | set(
    re.findall(r"`(README\.md)`", PAGE)
)


def test_every_module_is_named() -> None:
    modules = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "service").rglob("*.py")
        if path.name != "__init__.py"
    }
    assert not modules - NAMED, sorted(modules - NAMED)


def test_every_path_named_exists() -> None:
    missing = sorted(path for path in NAMED if not (ROOT / path.rstrip("/")).exists())
    assert not missing, missing


def test_a_recipe_names_files_of_the_tree() -> None:
    recipes = PAGE[PAGE.index("## Recipes") :]
    listed = re.findall(r"^- `([^`]+)`", recipes, flags=re.M)
    assert len(listed) > 15
    for path in listed:
        if "<" in path:  # a new file: its folder exists
            assert (ROOT / path.rsplit("/", 1)[0]).is_dir(), path
        else:
            assert (ROOT / path).exists(), path
