"""The sin-cos grids' audit: by token row, the library's arithmetic (numpy's float64 or
timm's float32), the tables stored in bfloat16 and float16, and each arithmetic's own path
in the key's layout; and a compare of two grids refuses a range past their rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.audit import paths, report
from service.encodings import registry, sincos2d, sincos3d
from tests.support import assert_problem, client_of

MAE: Any = sincos2d.preset_key(64, 16, 16, "mae", {}, "library", "float32")
TIMM: Any = sincos2d.preset_key(64, 16, 16, "timm", {}, "library", "float32")


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def path(key: Any, name: str) -> Any:
    return {found.name: found for found in paths.paths_of(key)}[name]


def test_the_paths_of_a_grid() -> None:
    assert report.names(MAE) == [
        "library",
        "bf16-table",
        "fp16-table",
        "float64-angles",
        "float32-angles",
    ]
    key = sincos3d.preset_key(64, (2, 4, 4), "cogvideox", {}, "library", "float32")
    assert report.names(key) == report.names(MAE)


@pytest.mark.parametrize(
    ("key", "own"),
    [
        pytest.param(MAE, "float64-angles", id="mae"),
        pytest.param(TIMM, "float32-angles", id="timm"),
    ],
)
def test_the_library_is_its_own_arithmetic_and_the_other_is_apart(key: Any, own: str) -> None:
    positions = np.arange(256, dtype=np.int64)
    library = path(key, "library").values(key, positions)
    np.testing.assert_array_equal(path(key, own).values(key, positions), library)
    other = "float32-angles" if own == "float64-angles" else "float64-angles"
    exact = paths.exact(key, positions)
    assert np.abs(path(key, other).values(key, positions) - exact).max() > 0
    assert np.abs(library - exact).max() < 1e-5
    np.testing.assert_array_equal(library, registry.take(key, positions).astype(np.float64))


def test_the_audit_over_http(http: httpx.Client) -> None:
    answer = http.get("/v1/audit/sincos-2d?height=16&width=16&dim=64&preset=timm")
    assert answer.status_code == 200, answer.text
    found = {each["name"]: each for each in answer.json()["paths"]}
    assert found["library"]["bands"][-1]["stop"] == 256  # the grid's rows
    assert found["bf16-table"]["first_over"]["1e-3"] is not None


def test_a_compare_past_a_grid_s_rows_is_refused(http: httpx.Client) -> None:
    grid, timm = (
        {"family": "sincos-2d", "parameters": {"height": 4, "width": 4, "dim": 16, "preset": p}}
        for p in ("mae", "timm")
    )
    same = http.post("/v1/compare", json={"a": grid, "b": timm, "start": 0, "stop": 16})
    assert same.status_code == 200, same.text
    past = http.post("/v1/compare", json={"a": grid, "b": timm, "start": 0, "stop": 17})
    assert_problem(past, 422, "stop", "16 rows")
