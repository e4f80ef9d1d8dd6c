"""Sinusoidal tables through the client against a real service: whole, in blocks, by any
family's name, with presets; problems; the cache statistics and readiness."""

from __future__ import annotations

import httpx
import numpy as np
import posenc_expected as expected
import pytest
from posenc_client import Client, ProblemError, Value

TABLE = "/v1/encodings/sinusoidal"


def test_table(pe: Client, http: httpx.Client) -> None:
    table = pe.table(100, 16, base=100.0, dtype="float64", layout="split")
    assert table.dtype == np.float64
    assert table.shape == (100, 16)
    assert table.flags.writeable
    params = {"max_len": 100, "d_model": 16, "base": 100.0, "dtype": "float64", "layout": "split"}
    assert np.array_equal(table, expected.raw(http, TABLE, **params))
    np.testing.assert_allclose(table, expected.sinusoidal(0, 100, 16, 100.0, "split"), atol=1e-15)


def test_table_defaults_and_odd_width(pe: Client) -> None:
    table = pe.table(50, 7)
    assert table.dtype == np.float32
    assert np.array_equal(table, expected.sinusoidal(0, 50, 7).astype(np.float32))


def test_table_block(pe: Client) -> None:
    block = pe.table(100, 16, start=10, stop=20, dim_start=4, dim_stop=8)
    assert np.array_equal(block, pe.table(100, 16)[10:20, 4:8])


def test_any_familys_table_by_its_name(pe: Client, http: httpx.Client) -> None:
    given: dict[str, Value] = {"d_model": 12, "base": 500.0, "layout": "split", "dtype": "float16"}
    block = pe.encoding("sinusoidal", 2**31, start=2**31 - 5, dim_start=3, **given)
    assert block.shape == (5, 9)
    assert block.dtype == np.float16
    whole = expected.raw(http, TABLE, max_len=2**31, start=2**31 - 5, **given)
    assert np.array_equal(block, whole[:, 3:])
    formula = expected.sinusoidal(2**31 - 5, 2**31, 12, 500.0, "split")[:, 3:]
    np.testing.assert_allclose(block, formula, atol=1e-3)
    # rotary's table by its name: (2, rows, rotary_dim), cos first
    stacked = pe.encoding("rotary", 10, head_dim=8)
    cos, sin = pe.rotary(10, 8)
    assert np.array_equal(stacked, np.stack([cos, sin]))


def test_errors_carry_the_problem(pe: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.table(10**7, 10**4)
    assert caught.value.status == 422
    assert caught.value.problem["setting"] == "PE_MAX_ELEMENTS"
    assert caught.value.type.endswith("limit-exceeded")
    assert "PE_MAX_ELEMENTS" in str(caught.value)
    with pytest.raises(ProblemError) as caught:
        pe.apply(np.zeros((3, 4), np.int32))
    assert caught.value.status == 422
    assert "int32" in caught.value.detail
    with pytest.raises(ProblemError) as caught:
        pe.table(10, 4, dmodel=4)  # a misspelt parameter is refused, not ignored
    assert caught.value.status == 422
    assert caught.value.problem["errors"]


def test_cache_stats_and_readiness(pe: Client) -> None:
    before = pe.cache_stats()
    pe.table(5, 5, base=5.5)
    after = pe.cache_stats()
    pe.table(5, 5, base=5.5, start=1)
    again = pe.cache_stats()
    assert pe.ready()
    assert (after["misses"], after["hits"]) == (before["misses"] + 1, before["hits"])
    assert (again["misses"], again["hits"]) == (after["misses"], after["hits"] + 1)


def test_a_presets_table_and_apply(pe: Client) -> None:
    table = pe.table(10, 8, preset="fairseq", padding_idx=0)
    np.testing.assert_allclose(table, expected.fairseq(10, 8, 0), atol=1e-6)
    assert np.all(table[0] == 0)
    library = pe.table(10, 8, preset="fairseq", rounding="library", padding_idx=0)
    assert np.array_equal(table, library)
    exact = pe.table(10, 8, preset="fairseq", rounding="exact", padding_idx=0)
    assert not np.array_equal(table, exact)
    x = np.zeros((3, 8), np.float32)
    assert np.array_equal(pe.apply(x, preset="fairseq", padding_idx=0), table[1:4])
    with pytest.raises(ProblemError) as error:
        pe.apply(x, preset="whisper", padding_idx=0)
    assert error.value.status == 422


def test_presets_are_listed(pe: Client) -> None:
    presets = {preset["name"]: preset for preset in pe.presets()}
    assert {"vaswani", "fairseq", "whisper"} <= presets.keys()
    assert presets["fairseq"]["formula"]
