"""A model's rotary tables by layer type (Gemma 3), Llama 4's attention temperature, and the
engine's parameters (``engine``, ``cache_dtype``, ``max_model_len``) through the client
against a real service: the same arrays as the ``GET`` of the parameters they stand for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import posenc_expected as expected
import pytest
from posenc_client import AsyncClient, Client, ProblemError

# Gemma 3's text model in transformers 5's form, small: sliding layers at theta 1e4, full
# layers at 1e6 with linear scaling by 8
GEMMA3: dict[str, Any] = {
    "model_type": "gemma3_text",
    "head_dim": 8,
    "max_position_embeddings": 16,
    "num_hidden_layers": 6,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
}
# each type's table as the GET names it
GEMMA3_QUERY: dict[str, dict[str, Any]] = {
    "sliding_attention": {"max_len": 16, "head_dim": 8, "base": 10000.0},
    "full_attention": {
        "max_len": 16,
        "head_dim": 8,
        "base": 1000000.0,
        "scaling": "linear",
        "factor": 8.0,
    },
}
PLAIN: dict[str, Any] = {"head_dim": 8, "max_position_embeddings": 16, "rope_theta": 500.0}
# Llama 4's text model, small: scales over 4 positions at a time, every 4th layer no RoPE
LLAMA4: dict[str, Any] = {
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "num_hidden_layers": 8,
        "floor_scale": 4,
        "attn_scale": 0.5,
        "max_position_embeddings": 64,
    },
}
TEMPERATURE = "/v1/encodings/temperature"
# a dynamic NTK scaling: vLLM keeps one static table, transformers' grows with max_len
DYNAMIC: dict[str, Any] = {
    "max_len": 64,
    "head_dim": 8,
    "scaling": "dynamic",
    "factor": 2.0,
    "max_position_embeddings": 16,
}


def get(http: httpx.Client, **params: Any) -> np.ndarray:
    """``GET /v1/encodings/rotary``'s ``(2, rows, rotary_dim)`` answer, as raw bytes."""
    return expected.raw(http, "/v1/encodings/rotary", **params)


def scales(start: int, stop: int, floor_scale: float, attn_scale: float) -> np.ndarray:
    """Llama 4's query scales in float64: ``log1p(floor((p + 1) / floor_scale)) * attn_scale
    + 1``."""
    positions = np.arange(start, stop, dtype=np.float64)
    return np.log1p(np.floor((positions + 1) / floor_scale)) * attn_scale + 1


def test_every_layer_types_table(pe: Client, http: httpx.Client, tmp_path: Path) -> None:
    layers = pe.rotary_layers(GEMMA3, stop=10)
    assert list(layers["tables"]) == ["sliding_attention", "full_attention"]
    for name, (cos, sin) in layers["tables"].items():
        want = get(http, **GEMMA3_QUERY[name], stop=10)
        assert cos.shape == (10, 8)
        assert np.array_equal(np.stack([cos, sin]), want), name
    assert layers["layer_types"] == GEMMA3["layer_types"]
    assert "rope_parameters.full_attention.factor" in layers["config_fields"]
    path = tmp_path / "config.json"
    path.write_bytes(httpx.Request("POST", "/", json=GEMMA3).content)
    again = pe.rotary_layers(path, stop=10)
    assert np.array_equal(
        again["tables"]["full_attention"][0], layers["tables"]["full_attention"][0]
    )


def test_one_layer_types_table(pe: Client, http: httpx.Client) -> None:
    one = pe.rotary_layers(GEMMA3, layer_type="full_attention")
    (cos, sin), *others = one["tables"].values()
    assert list(one["tables"]) == ["full_attention"]
    assert not others
    assert np.array_equal(np.stack([cos, sin]), get(http, **GEMMA3_QUERY["full_attention"]))
    # from_config passes layer_type on; without it, a config of several tables is refused
    same_cos, same_sin = pe.from_config(GEMMA3, layer_type="full_attention")
    assert np.array_equal(same_cos, cos)
    assert np.array_equal(same_sin, sin)
    with pytest.raises(ValueError, match="give layer_type"):
        pe.from_config(GEMMA3)
    with pytest.raises(ProblemError) as caught:
        pe.rotary_layers(GEMMA3, layer_type="global")
    assert "sliding_attention" in caught.value.detail


def test_a_config_of_one_table(pe: Client, http: httpx.Client) -> None:
    layers = pe.rotary_layers(PLAIN, max_len=12)
    assert list(layers["tables"]) == [""]
    cos, sin = layers["tables"][""]
    assert np.array_equal(np.stack([cos, sin]), get(http, max_len=12, head_dim=8, base=500.0))
    assert layers["layer_types"] is None
    assert set(layers["config_fields"]) == {"head_dim", "max_position_embeddings", "rope_theta"}


def test_temperature(pe: Client, http: httpx.Client) -> None:
    library = pe.temperature(8200, start=8180)
    assert library.shape == (20,)
    assert library.dtype == np.float32
    raw = expected.raw(http, TEMPERATURE, max_len=8200, start=8180)
    assert np.array_equal(library, raw[:, 0])
    np.testing.assert_allclose(library, scales(8180, 8200, 8192, 0.1), rtol=1e-6)
    exact = pe.temperature(40, floor_scale=8.0, attn_scale=2.0, rounding="exact", dtype="float64")
    np.testing.assert_allclose(exact, scales(0, 40, 8, 2), rtol=1e-15)
    assert exact.flags.writeable
    with pytest.raises(ProblemError) as caught:
        pe.temperature(10, floor_scale=0.0)
    assert caught.value.status == 422


def test_temperature_from_config(pe: Client, http: httpx.Client) -> None:
    got, kinds = pe.temperature_from_config(LLAMA4)
    assert kinds == ["rope", "rope", "rope", "nope"] * 2
    raw = expected.raw(http, TEMPERATURE, max_len=64, floor_scale=4, attn_scale=0.5)
    assert np.array_equal(got, raw[:, 0])
    block, _ = pe.temperature_from_config(LLAMA4, max_len=100, start=90, dtype="float64")
    np.testing.assert_allclose(block, scales(90, 100, 4, 0.5), rtol=1e-6)
    explicit = {**LLAMA4["text_config"], "no_rope_layers": [0, 1, 1]}
    assert pe.temperature_from_config(explicit)[1] == ["nope", "rope", "rope"]
    # a config that says nothing of its layers: the default scales, no kinds
    plain, none = pe.temperature_from_config({"max_position_embeddings": 8})
    assert none is None
    assert np.array_equal(plain, pe.temperature(8))
    with pytest.raises(ProblemError) as caught:
        pe.temperature_from_config({**LLAMA4["text_config"], "attn_temperature_tuning": False})
    assert "attn_temperature_tuning" in caught.value.detail


def test_rotary_passes_the_engines_parameters(pe: Client, http: httpx.Client) -> None:
    vllm, _ = pe.rotary(**DYNAMIC, engine="vllm")
    assert np.array_equal(vllm, get(http, **DYNAMIC, engine="vllm")[0])
    assert not np.array_equal(vllm, pe.rotary(**DYNAMIC)[0])
    bf16, _ = pe.rotary(32, 8, base=500.0, cache_dtype="bfloat16")
    assert np.array_equal(
        bf16, get(http, max_len=32, head_dim=8, base=500.0, cache_dtype="bfloat16")[0]
    )
    assert not (bf16.view(np.uint32) & 0xFFFF).any()  # bfloat16's values, given in float32
    longrope: dict[str, Any] = {
        "scaling": "longrope",
        "factor": 2.0,
        "short_factor": "1,1,1,1",
        "long_factor": "1,1.5,2,4",
        "original_max_position_embeddings": 32,
    }
    deployed, _ = pe.rotary(16, 8, engine="vllm", max_model_len=64, **longrope)
    assert np.array_equal(
        deployed, get(http, max_len=16, head_dim=8, engine="vllm", max_model_len=64, **longrope)[0]
    )
    assert not np.array_equal(deployed, pe.rotary(16, 8, engine="vllm", **longrope)[0])


def test_from_config_passes_the_engines_parameters(pe: Client, http: httpx.Client) -> None:
    config = {
        **PLAIN,
        "dtype": "bfloat16",
        "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
    }
    query = {**DYNAMIC, "base": 500.0}
    cos, sin = pe.from_config(config, max_len=64, engine="vllm")  # the config's bfloat16
    want = get(http, **query, engine="vllm", cache_dtype="bfloat16")
    assert np.array_equal(np.stack([cos, sin]), want)
    float32, _ = pe.from_config(config, max_len=64, engine="vllm", cache_dtype="float32")
    assert np.array_equal(float32, get(http, **query, engine="vllm")[0])
    assert not np.array_equal(float32, cos)
    layers = pe.rotary_layers(GEMMA3, engine="vllm", cache_dtype="float16")
    full, _ = layers["tables"]["full_attention"]
    query16 = {**GEMMA3_QUERY["full_attention"], "engine": "vllm", "cache_dtype": "float16"}
    assert np.array_equal(full, get(http, **query16)[0])
    with pytest.raises(ProblemError) as caught:
        pe.from_config(PLAIN, max_model_len=64)  # for engine=vllm with longrope only
    assert "max_model_len" in caught.value.detail


def test_rotary_apply_passes_the_engines_parameters(pe: Client) -> None:
    q = np.random.default_rng(2).standard_normal((2, 5, 8)).astype(np.float32)
    given: dict[str, Any] = {
        key: value for key, value in DYNAMIC.items() if key not in ("max_len", "head_dim")
    }
    engine: dict[str, Any] = {"engine": "vllm", "cache_dtype": "bfloat16"}
    y = pe.rotary_apply(q, offset=50, max_len=64, **given, **engine)
    cos, sin = pe.rotary(**DYNAMIC, **engine)
    assert np.array_equal(y, expected.rotate_half(q, cos[50:55], sin[50:55]))
    assert not np.array_equal(y, pe.rotary_apply(q, offset=50, max_len=64, **given))


def test_async_client(service_url: str, pe: Client) -> None:
    want = pe.rotary_layers(GEMMA3)
    want_scales, want_kinds = pe.temperature_from_config(LLAMA4)

    async def main() -> None:
        async with AsyncClient(service_url) as client:
            layers = await client.rotary_layers(GEMMA3)
            assert layers["layer_types"] == want["layer_types"]
            for name, (cos, sin) in want["tables"].items():
                assert np.array_equal(layers["tables"][name][0], cos)
                assert np.array_equal(layers["tables"][name][1], sin)
            got, kinds = await client.temperature_from_config(LLAMA4)
            assert np.array_equal(got, want_scales)
            assert kinds == want_kinds
            assert np.array_equal(await client.temperature(64, floor_scale=4, attn_scale=0.5), got)
            cos, _ = await client.from_config(GEMMA3, layer_type="sliding_attention")
            assert np.array_equal(cos, want["tables"]["sliding_attention"][0])

    anyio.run(main)
