"""Rotary tables and ALiBi through the client against a real service."""

from __future__ import annotations

import httpx
import numpy as np
import posenc_expected as expected
import pytest
from posenc_client import Client, ProblemError


def test_rotary_tables(pe: Client, http: httpx.Client) -> None:
    cos, sin = pe.rotary(64, 16, dtype="float64", rounding="exact")
    assert cos.shape == sin.shape == (64, 16)
    assert cos.dtype == sin.dtype == np.float64
    want_cos, want_sin = expected.rotary(64, 16)
    np.testing.assert_allclose(cos, want_cos, atol=1e-15)
    np.testing.assert_allclose(sin, want_sin, atol=1e-15)
    raw = expected.raw(
        http, "/v1/encodings/rotary", max_len=64, head_dim=16, dtype="float64", rounding="exact"
    )
    assert np.array_equal(np.stack([cos, sin]), raw)
    library_cos, _ = pe.rotary(64, 16)
    assert library_cos.dtype == np.float32
    np.testing.assert_allclose(library_cos, want_cos, atol=1e-5)


def test_rotary_rows_and_parameters(pe: Client) -> None:
    cos, sin = pe.rotary(100, 8, base=500.0, start=90, stop=95)
    assert cos.shape == (5, 8)
    whole_cos, whole_sin = pe.rotary(100, 8, base=500.0)
    assert np.array_equal(cos, whole_cos[90:95])
    assert np.array_equal(sin, whole_sin[90:95])
    # linear scaling by 2: position 2p turns as far as position p without it
    stretched, _ = pe.rotary(64, 8, scaling="linear", factor=2.0, rounding="exact")
    plain, _ = pe.rotary(32, 8, rounding="exact")
    np.testing.assert_allclose(stretched[::2], plain, atol=1e-7)
    # a partial rotary factor: only half of each head turns
    half_cos, _ = pe.rotary(4, 16, partial_rotary_factor=0.5)
    assert half_cos.shape == (4, 8)
    # interleaved: columns 2i and 2i + 1 are equal
    pairs, _ = pe.rotary(4, 8, convention="interleaved")
    assert np.array_equal(pairs[:, 0::2], pairs[:, 1::2])


def test_rotary_scaling_with_lists_and_booleans(pe: Client) -> None:
    def longrope(long_factor: list[float]) -> np.ndarray:
        cos, _ = pe.rotary(
            16,
            8,
            scaling="longrope",
            factor=2.0,
            short_factor=[1.0] * 4,
            long_factor=long_factor,
            original_max_position_embeddings=8,
        )
        return cos

    stretched = longrope([1.0, 1.5, 2.0, 4.0])  # max_len passes 8: the long factors apply
    assert stretched.shape == (16, 8)
    assert not np.array_equal(stretched, longrope([1.0] * 4))

    def yarn(truncate: bool) -> np.ndarray:
        cos, _ = pe.rotary(
            16,
            32,
            scaling="yarn",
            factor=4.0,
            original_max_position_embeddings=100,
            truncate=truncate,
        )
        return cos

    assert not np.array_equal(yarn(True), yarn(False))  # sent as true and false


def test_rotary_problems(pe: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.rotary(10, 8, scaling="linear")  # without its factor
    assert caught.value.status == 422
    assert "factor" in str(caught.value.problem)
    with pytest.raises(ProblemError) as caught:
        pe.rotary_apply(np.zeros((4, 7), np.float32))  # an odd head
    assert caught.value.status == 422


def test_alibi_slopes(pe: Client) -> None:
    exact = pe.alibi_slopes(8, rounding="exact", dtype="float64")
    assert np.array_equal(exact, expected.slopes(8))  # powers of two: exact in any dtype
    bloom = pe.alibi_slopes(12)
    assert bloom.dtype == np.float32
    np.testing.assert_allclose(bloom, expected.slopes(12), rtol=1e-6)


def test_alibi_bias(pe: Client, http: httpx.Client) -> None:
    bias = pe.alibi_bias(4, 6, rounding="exact", dtype="float64")
    assert bias.shape == (4, 6, 6)
    i, j = np.indices((6, 6))
    slopes = expected.slopes(4)[:, None, None]
    want = np.where(j <= i, -slopes * (i - j), -np.inf)
    assert np.array_equal(bias, want)
    # decoding with a cache: the last 2 query rows of 6 keys, BLOOM's form
    step = pe.alibi_bias(4, 2, key_len=6, form="bloom")
    raw = expected.raw(http, "/v1/biases/alibi", num_heads=4, max_len=2, key_len=6, form="bloom")
    assert np.array_equal(step, raw)
    assert step.shape == (4, 2, 6)
    assert np.isneginf(step[:, 0, 5]).all()  # the first query row does not see the last key
    assert np.isfinite(step[:, 1]).all()
    block = pe.alibi_bias(4, 6, form="symmetric", start=2, stop=4)
    assert np.array_equal(block, pe.alibi_bias(4, 6, form="symmetric")[:, 2:4])
    with pytest.raises(ProblemError) as caught:
        pe.alibi_bias(4, 6, key_len=3)  # fewer keys than queries, masked
    assert caught.value.status == 422
