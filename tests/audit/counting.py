"""The entries an audit evaluates, counted as it runs: every call of a path's values, of
the exact entries and of the device's envelope adds its positions × the audit's width."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from service.audit import envelope, paths


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-item list that counts, from now on, the entries evaluated."""
    seen = [0]

    def counted(call: Callable[..., Any]) -> Callable[..., Any]:
        def run(key: Any, positions: Any) -> Any:
            seen[0] += len(positions) * paths.width(key)
            return call(key, positions)

        return run

    paths_of = paths.paths_of
    monkeypatch.setattr(paths, "exact", counted(paths.exact))
    monkeypatch.setattr(envelope, "bounds", counted(envelope.bounds))
    monkeypatch.setattr(
        paths,
        "paths_of",
        lambda key: tuple(dataclasses.replace(p, values=counted(p.values)) for p in paths_of(key)),
    )
    return seen
