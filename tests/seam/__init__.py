"""Stub families, one per shape the seam serves: each a new file that declares itself
(:class:`service.web.declared.Declared`) as its ``TABLE``: :func:`stubs` finds every one,
and ``tests/test_family_seam.py`` serves them."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from service.encodings import registry
from service.web.declared import Declared


def stubs() -> tuple[Declared[Any, Any], ...]:
    """The families this folder's modules declare: each module's ``TABLE``."""
    modules = (
        importlib.import_module(f"{__name__}.{each.name}")
        for each in pkgutil.iter_modules(__path__)
    )
    return tuple(
        module.TABLE for module in modules if isinstance(getattr(module, "TABLE", None), Declared)
    )


@contextmanager
def served() -> Iterator[tuple[Declared[Any, Any], ...]]:
    """The stubs, known to the registry while the block runs (an app that serves them
    registers them as it routes them) and forgotten after it: no other test of the process
    sees a stub's family (``GET /v1/presets`` lists every known family's presets)."""
    found = stubs()
    with ExitStack() as stack:
        for declared in found:
            stack.enter_context(registry.registered(declared.family))
        yield found
