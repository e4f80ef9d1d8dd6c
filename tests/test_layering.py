"""The layers: the numpy-only modules import no web framework (checked in a fresh
interpreter), no router imports another, and matplotlib waits for the first picture."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from typing import Final

import pytest

from tests.support import ROOT, modules_of_a_started_app, syntax_nodes

WEB = ("fastapi", "starlette", "uvicorn", "httpx", "pydantic", "pydantic_settings", "anyio")
# The numbers layers, every module of them (a new one is checked without an edit here),
# and the other modules the numbers and the wire formats stand on.
NUMBERS = ("encodings", "codecs", "audit")
PURE = [
    *(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for folder in NUMBERS
        for p in sorted((ROOT / "service" / folder).rglob("*.py"))
    ),
    "service.cache",
    "service.cores",
    "service.errors",
    "service.inference.wire",
    "service.plots",
    "service.arrays",
    "service.text",
]
# One fresh interpreter imports them in turn and reports what each import loaded beyond the
# ones before (a module loaded by an earlier one loads nothing more): any web framework
# loaded fails the first module whose import loads it. About a second; an interpreter for
# each module would cost forty.
_EACH_IN_TURN: Final = """
import importlib, json, sys
for name in sys.argv[1:]:
    before = set(sys.modules)
    importlib.import_module(name)
    print(json.dumps([name, sorted(set(sys.modules) - before)]))
"""


@pytest.fixture(scope="module")
def loaded_by_each() -> dict[str, list[str]]:
    """What importing each pure module loaded, in a fresh interpreter (one that does not
    import fails them all)."""
    out = subprocess.run(
        [sys.executable, "-c", _EACH_IN_TURN, *PURE],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return dict(map(json.loads, out.stdout.splitlines()))


def test_the_numbers_layers_are_all_checked() -> None:
    """The glob finds them: a module added to the numbers layers is checked with no edit."""
    assert {"service.encodings.temperature", "service.codecs.npy", "service.audit"} <= set(PURE)
    assert len(PURE) == len(set(PURE))


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_web_framework(
    module: str, loaded_by_each: dict[str, list[str]]
) -> None:
    loaded = loaded_by_each[module]
    assert not {name for name in loaded if name.split(".")[0] in WEB}


def imports_of(path: str) -> set[str]:
    """The ``service`` modules a source file imports."""
    names: set[str] = set()
    for node in syntax_nodes(ROOT / path):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.startswith("service.")}


ROUTERS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "service" / "routes").glob("*.py"))


@pytest.mark.parametrize("path", [p for p in ROUTERS if not p.endswith("__init__.py")])
def test_no_router_imports_another(path: str) -> None:
    others = {f"service.routes.{name.rsplit('/', 1)[1][:-3]}" for name in ROUTERS} - {
        "service.routes.__init__"
    }
    assert not {name for name in imports_of(path) if name.startswith("service.routes")}
    assert not imports_of(path) & others


LOWER = [
    *sorted(
        p.relative_to(ROOT).as_posix()
        for folder in ("encodings", "codecs")
        for p in (ROOT / "service" / folder).glob("*.py")
    ),
    "service/arrays.py",
    "service/cache.py",
    "service/cores.py",
    "service/errors.py",
    "service/settings.py",
    "service/text.py",
]


@pytest.mark.parametrize("path", LOWER)
def test_the_lower_layers_import_nothing_above_them(path: str) -> None:
    """Encodings, codecs, the cache, errors and settings know no handler, router or toolkit."""
    above = (
        "service.web",
        "service.routes",
        "service.handlers",
        "service.batches",
        "service.schemas",
        "service.app",
    )
    assert not {name for name in imports_of(path) if name.startswith(above)}
    if path == "service/settings.py":  # nothing of the service but the largest position
        assert imports_of(path) <= {"service.arrays", "service.arrays.POSITION_CEILING"}


@pytest.mark.slow  # a started process's modules: the full run's
def test_matplotlib_is_loaded_only_for_the_first_picture() -> None:
    """The service starts (and stays small) without importing the plotting library."""
    loaded = modules_of_a_started_app()
    assert "service.plots" in loaded
    assert not {name for name in loaded if name.split(".")[0] == "matplotlib"}


SOURCES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "service").rglob("*.py"))


def test_only_the_server_wing_knows_uvicorns_internals() -> None:
    """uvicorn's private modules (its protocols, its types) are imported in service/server/
    alone; the rest of the service knows uvicorn as a runner at most (__main__)."""
    for path in SOURCES:
        nodes = syntax_nodes(ROOT / path)
        modules = {node.module or "" for node in nodes if isinstance(node, ast.ImportFrom)} | {
            alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names
        }
        private = {m for m in modules if m.startswith(("uvicorn.protocols", "uvicorn._types"))}
        assert not private or path.startswith("service/server/"), path


def test_only_the_start_up_reads_the_environments_settings() -> None:
    """One source of settings: the app's. Settings are read from the environment by the
    start-up (python -m service, and create_app's default) and nowhere else."""
    readers = set()
    for path in SOURCES:
        for node in syntax_nodes(ROOT / path):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called = node.func.id
                if called == "from_environment" or (
                    called == "Settings" and not node.args and not node.keywords
                ):
                    readers.add(path)
    start_up = {"service/__main__.py", "service/cli.py", "service/app.py", "service/settings.py"}
    assert readers <= start_up, readers


@pytest.mark.parametrize(
    "path",
    sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "service" / "codecs").glob("*.py")),
)
def test_the_codecs_import_nothing_of_the_encodings(path: str) -> None:
    """Wire formats know arrays (service.arrays), not families: a format is one module."""
    assert not {name for name in imports_of(path) if name.startswith("service.encodings")}


HTTP: Final = (
    "service.web",
    "service.schemas",
    "service.middleware",
    "service.server",
    "service.routes",
    "service.app",
)
# Each layer of docs/architecture.md, and what above it it must not import.
ABOVE: Final = {
    "service/web/": ("service.middleware", "service.server", "service.routes", "service.app"),
    "service/middleware/": ("service.server", "service.routes", "service.app"),
    "service/server/": (
        "service.routes",
        "service.app",
        "service.handlers",
        "service.batches",
        "service.web",
    ),
    # the pipelines know no HTTP, wire model or router: preload reads a family's query
    # with the reader the app gives it
    **dict.fromkeys(
        ("service/handlers.py", "service/batches.py", "service/ids.py", "service/preload.py"), HTTP
    ),
    # the protocol's models are made from the declarations the app gives it
    "service/inference/": (
        "service.web",
        "service.middleware",
        "service.server",
        "service.routes",
        "service.app",
    ),
    "service/schemas/": ("service.web", "service.middleware", "service.server", "service.routes"),
}


@pytest.mark.parametrize("folder", list(ABOVE))
def test_the_layers_import_nothing_above_them(folder: str) -> None:
    for path in SOURCES:
        if path.startswith(folder):
            above = {name for name in imports_of(path) if name.startswith(ABOVE[folder])}
            assert not above, (path, above)
