"""The multi-axis RoPE's audit: by token, the library's table, the tables stored in
bfloat16 and float16, the frequencies in float32 against float64 (FLUX's reference since
2025 against diffusers' and the 2024 code), the ids built in bfloat16 (exact to 256) and
float16, and the device envelope at each pair's id."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.audit import envelope, paths, report
from service.encodings import rope_nd
from tests.support import client_of


def flux(preset: str = "flux", grid: tuple[int, ...] = (32, 32), **given: Any) -> Any:
    return rope_nd.preset_key(preset, grid, given, None, "interleaved", "library", "float32")


@pytest.fixture(scope="module")
def http(in_process_app: httpx.BaseTransport) -> Iterator[httpx.Client]:
    with client_of(in_process_app) as client:
        yield client


def path(key: Any, name: str) -> Any:
    return {found.name: found for found in paths.paths_of(key)}[name]


def test_the_paths_of_a_multi_axis_table() -> None:
    assert report.names(flux()) == [
        "library",
        "bf16-table",
        "fp16-table",
        "float32-angles",
        "float64-angles",
        "bf16-ids",
        "fp16-ids",
        "device",
    ]


def test_bfloat16_ids_are_wrong_from_257() -> None:
    key = flux(grid=(1, 300))
    rows = np.arange(300, dtype=np.int64)
    errors = np.abs(path(key, "bf16-ids").values(key, rows) - paths.exact(key, rows))
    assert int(np.flatnonzero(errors.max(axis=1) > 1e-3)[0]) == 257
    np.testing.assert_array_equal(
        path(key, "bf16-ids").values(key, rows[:257]), path(key, "library").values(key, rows[:257])
    )


def test_float16_ids_past_their_range_count_as_wrong() -> None:
    key = flux(grid=(1, 70000))
    rows = np.array([65504, 65520], dtype=np.int64)
    got = path(key, "fp16-ids").values(key, rows)
    assert np.isfinite(got[0]).all()
    assert np.isnan(got[1]).all()


def test_float32_angles_are_the_2025_reference_s() -> None:
    key, bfl = flux(), flux("flux-bfl")
    rows = np.arange(0, key.tokens, 7, dtype=np.int64)
    np.testing.assert_array_equal(
        path(key, "float32-angles").values(key, rows), path(bfl, "library").values(bfl, rows)
    )
    exact = paths.exact(key, rows)
    assert np.abs(path(key, "library").values(key, rows) - exact).max() <= 2.0**-25
    assert np.abs(path(bfl, "library").values(bfl, rows) - exact).max() > 1e-7


def test_the_envelope_takes_each_pair_s_own_axis() -> None:
    """A token's pairs turn by its ids on their own axes: (0, row, col)'s first axis is 0,
    so its 8 pairs' envelope is the rounding alone, wherever the token is."""
    key = flux("flux-bfl")
    bound, drift = envelope.bounds(key, np.array([key.tokens - 1], dtype=np.int64))
    assert drift[0, :8].max() < 1e-40  # half the ulp of an angle of 0
    assert (drift[0, 8:] > 0).all()
    assert bound[0, :8].max() < bound[0, 8:].max()


def test_the_audit_over_http(http: httpx.Client) -> None:
    answer = http.get("/v1/audit/rope-nd?preset=flux&grid=16,300&ids_dtype=bfloat16")
    assert answer.status_code == 200, answer.text
    found = {each["name"]: each for each in answer.json()["paths"]}
    assert found["library"]["first_over"]["1e-3"] == 257  # row 0, column 257: 256
    assert found["float64-angles"]["first_over"]["1e-3"] == 257  # the key's ids
    assert found["library"]["bands"][-1]["stop"] == 16 * 300


def test_the_2025_reference_against_diffusers_in_one_compare(http: httpx.Client) -> None:
    a, b = (
        {"family": "rope-nd", "parameters": {"preset": p, "grid": "64,64", "text_tokens": 512}}
        for p in ("flux", "flux-bfl")
    )
    answer = http.post("/v1/compare", json={"a": a, "b": b, "start": 0, "stop": 4608})
    assert answer.status_code == 200, answer.text
    bands = answer.json()["bands"]
    assert bands[0]["max_difference"] == 0.0  # text tokens: every id 0
    assert 1e-7 < max(band["max_difference"] for band in bands) < 1e-5
