"""Rotary tables from a model's ``config.json`` through the client against a real service:
the same arrays as ``GET /v1/encodings/rotary`` with the parameters the config stands for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import posenc_expected as expected
import pytest
from posenc_client import AsyncClient, Client, ProblemError

# Llama 3.1 8B's config.json, its RoPE fields and the ones head_dim is read from
LLAMA31: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}
# its parameters as the GET names them
LLAMA31_QUERY: dict[str, Any] = {
    "head_dim": 128,
    "base": 500000.0,
    "scaling": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
# a plain RoPE model (no scaling; head_dim from hidden_size / num_attention_heads)
PLAIN: dict[str, Any] = {
    "hidden_size": 1024,
    "num_attention_heads": 16,
    "max_position_embeddings": 2048,
    "rope_theta": 1000000.0,
}
PLAIN_QUERY: dict[str, Any] = {"head_dim": 64, "base": 1000000.0}


def get(http: httpx.Client, **params: Any) -> np.ndarray:
    """``GET /v1/encodings/rotary``'s ``(2, rows, rotary_dim)`` answer, as raw bytes."""
    return expected.raw(http, "/v1/encodings/rotary", **params)


@pytest.mark.parametrize(
    ("config", "query", "asked"),
    [
        pytest.param(LLAMA31, LLAMA31_QUERY, {"max_len": 64}, id="llama3.1-first-rows"),
        # no max_len: the config's max_position_embeddings; only the last rows fetched
        pytest.param(LLAMA31, LLAMA31_QUERY, {"start": 131000}, id="llama3.1-last-rows"),
        pytest.param(PLAIN, PLAIN_QUERY, {}, id="plain-whole"),
    ],
)
def test_the_tables_of_the_get(
    pe: Client,
    http: httpx.Client,
    config: dict[str, Any],
    query: dict[str, Any],
    asked: dict[str, Any],
) -> None:
    cos, sin = pe.from_config(config, **asked)
    params = {"max_len": config["max_position_embeddings"], **query, **asked}
    want = get(http, **params)
    assert cos.dtype == sin.dtype == np.float32
    assert cos.shape == sin.shape == want.shape[1:]
    assert np.array_equal(np.stack([cos, sin]), want)
    again_cos, again_sin = pe.rotary(**params)
    assert np.array_equal(cos, again_cos)
    assert np.array_equal(sin, again_sin)
    assert cos.flags.writeable  # arrays of their own, not views of one answer
    assert not np.shares_memory(cos, sin)


def test_a_dict_a_path_and_bytes_alike(pe: Client, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(PLAIN))
    cos, sin = pe.from_config(PLAIN, max_len=16)
    for config in (path, str(path), path.read_bytes()):
        other_cos, other_sin = pe.from_config(config, max_len=16)
        assert np.array_equal(other_cos, cos), type(config)
        assert np.array_equal(other_sin, sin), type(config)


def test_the_parameters_given_override_the_config(pe: Client, http: httpx.Client) -> None:
    asked: dict[str, Any] = {
        "max_len": 40,
        "start": 30,
        "stop": 35,
        "convention": "interleaved",
        "rounding": "exact",
        "dtype": "float64",
    }
    cos, sin = pe.from_config(LLAMA31, **asked)
    assert cos.shape == (5, 128)
    assert cos.dtype == np.float64
    assert np.array_equal(np.stack([cos, sin]), get(http, **LLAMA31_QUERY, **asked))
    assert np.array_equal(cos[:, 0::2], cos[:, 1::2])  # interleaved: pairs side by side
    unscaled, _ = pe.rotary(head_dim=128, base=500000.0, **asked)
    assert not np.array_equal(cos, unscaled)  # the config's llama3 scaling was applied
    # rows past the config's max_position_embeddings, when asked for
    longer, _ = pe.from_config(PLAIN, max_len=4096, start=4090, rounding="exact")
    plain_cos, _ = expected.rotary(4096, 64, base=1000000.0)
    np.testing.assert_allclose(longer, plain_cos[4090:], atol=1e-6)


@pytest.mark.parametrize(
    ("config", "asked", "name", "words"),
    [
        pytest.param({**PLAIN, "head_dim": 7}, {}, "head_dim", "must be even", id="odd-head"),
        pytest.param(
            {"head_dim": 8}, {}, "max_len", "give max_len", id="no-max-position-embeddings"
        ),
        pytest.param(
            {**LLAMA31, "rope_scaling": {"rope_type": "fancy"}},
            {"max_len": 8},
            "rope_scaling.rope_type",
            "not a known rope_type",
            id="unknown-rope-type",
        ),
        pytest.param(b"{not json", {"max_len": 8}, "", "not JSON", id="not-json"),
        pytest.param(PLAIN, {"base": 10.0}, "base", "not a parameter", id="not-a-parameter"),
    ],
)
def test_a_refused_config_raises_with_the_detail(
    pe: Client, config: dict[str, Any] | bytes, asked: dict[str, Any], name: str, words: str
) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.from_config(config, **asked)
    assert caught.value.status in (400, 422)
    assert name in caught.value.detail
    assert words in caught.value.detail
    assert words in str(caught.value)


def test_a_config_json_cannot_hold_is_refused_before_sending(pe: Client) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        pe.from_config({**PLAIN, "rope_theta": float("nan")}, max_len=8)


def test_encoding_without_max_len_sends_none(pe: Client) -> None:
    with pytest.raises(ProblemError) as caught:
        pe.encoding("rotary", head_dim=8)
    assert [error["name"] for error in caught.value.problem["errors"]] == ["max_len"]
    stacked = pe.encoding("rotary", max_len=4, head_dim=8)
    assert stacked.shape == (2, 4, 8)


def test_async_client(service_url: str, pe: Client, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(json.dumps(LLAMA31).encode())
    want_cos, want_sin = pe.from_config(LLAMA31, max_len=32)

    async def main() -> None:
        async with AsyncClient(service_url) as client:
            for config in (LLAMA31, path, path.read_bytes()):
                cos, sin = await client.from_config(config, max_len=32)
                assert np.array_equal(cos, want_cos)
                assert np.array_equal(sin, want_sin)
            with pytest.raises(ProblemError) as caught:
                await client.from_config({**LLAMA31, "head_dim": 7}, max_len=8)
            assert "must be even" in caught.value.detail
            with pytest.raises(ProblemError):
                await client.encoding("rotary", head_dim=8)

    anyio.run(main)
