"""Conformance: ``engine=vllm`` (``GET /v1/encodings/rotary``, from-config) against vLLM 0.33.0's
own arithmetic (commit 4ba787ec9, ``vllm/model_executor/layers/rotary_embedding/``; vLLM does
not install here: its torch code transcribed operation for operation below, each function
citing file, method and lines, checked bit identical to the real methods). vLLM's cache rows:
``[cos | sin]``, ``rotary_dim / 2`` each, float32, then ``cache.to(dtype)`` (``base.py``
L58-63); the first halves of the service's cos and sin (``half``: pair k at k and k + r/2)
within ``2^-22 (1 + |angle|)`` times the attention factor where above 1. Cases: dynamic (factor
2, d 128, max_position_embeddings 4096: vLLM's one table of 4096 rows, then the plain formula);
longrope (Phi-3-mini-128k; ``max_model_len`` by default ``original_max_position_embeddings``,
``config/model.py`` L2643-2650: short factors; 131072: long); yarn (Qwen2.5: both engines);
``DeepseekV3Config(...).to_dict()`` (vLLM: ``DeepseekScalingRotaryEmbedding``,
``models/deepseek_v2.py`` L542-547; transformers 5.23.0: ``DeepseekV3RotaryEmbedding``,
``ROPE_INIT_FUNCTIONS["yarn"]``), mscale and mscale_all_dim 1, and mscale 0.707 alone (they
differ). ``cache_dtype=bfloat16``: vLLM's float32 cache ``.to(torch.bfloat16)``, bit for bit.
Summary: ``artifacts/conformance-engines.json``. Needs the conformance extra."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import json
import math
import os
from collections.abc import Iterator
from typing import Any, Final

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray

from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

Table = tuple[NDArray[np.float64], NDArray[np.float64]]
PATH: Final = "/v1/encodings/rotary"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-engines.json"
BOUND: Final = 2.0**-22
# Phi-3-mini-128k-instruct's longrope factors (head_dim 96: 48 pairs), as its config.json has them
PHI3_LONG: Final = [
    *(1.0700000524520874, 1.1200000047683716, 1.149999976158142, 1.4199999570846558),
    *(1.5699999332427979, 1.7999999523162842, 2.129999876022339, 2.129999876022339),
    *(3.009999990463257, 5.910000324249268, 6.950000286102295, 9.070000648498535),
    *(9.930000305175781, 10.710000038146973, 11.130000114440918, 14.609999656677246),
    *(15.409998893737793, 19.809999465942383, 37.279998779296875, 38.279998779296875),
    *(38.599998474121094, 40.12000274658203, 46.20000457763672, 50.940006256103516),
    *(53.66000747680664, 54.9373893737793, 56.89738845825195, 57.28738784790039),
    *(59.98738479614258, 60.86738586425781, 60.887386322021484, 61.71739196777344),
    *(62.91739273071289, 62.957393646240234, 63.41739273071289, 63.8173942565918),
    *(63.83739471435547, 63.897396087646484, 63.93739700317383, 64.06739807128906),
    *(64.11434936523438, 64.12435150146484, 64.15435028076172, 64.19435119628906),
    *(64.24435424804688, 64.57435607910156, 64.69000244140625, 64.76000213623047),
]
PHI3_SHORT: Final = [
    *(1.1, 1.1, 1.1, 1.3000000000000003, 1.3500000000000003, 1.3500000000000003),
    *(1.4000000000000004, 1.5500000000000005, *[2.000000000000001] * 17),
    *(*[2.0500000000000007] * 6, *[2.1000000000000005] * 2, 2.1500000000000004, *[2.25] * 5),
    *(2.3999999999999995, 2.4499999999999993, 2.499999999999999, 2.6999999999999984),
    *(2.6999999999999984, 2.7499999999999982, 2.799999999999998, 2.8999999999999977),
    3.049999999999997,
]
PHI3: Final = {"head_dim": 96, "base": 10000.0, "scaling": "longrope", "engine": "vllm"}
PHI3_MORE: Final = {"original_max_position_embeddings": 4096, "max_position_embeddings": 131072}
QWEN: Final = {"head_dim": 128, "base": 1e6, "scaling": "yarn", "factor": 4.0, "max_len": 131072}
ORIGINAL: Final = 32768  # Qwen2.5's original_max_position_embeddings
DEEPSEEK: Final = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}
CASES: Final = {"v3": {"mscale": 1.0, "mscale_all_dim": 1.0}, "mscale-only": {"mscale": 0.707}}


@functools.cache
def lib(name: str) -> Any:
    return importlib.import_module(name)


# --- vLLM 0.33.0 (4ba787ec9), vllm/model_executor/layers/rotary_embedding/, transcribed ---
def v_inv_freq(base: float, rotary_dim: int) -> Any:
    """base.py L80-92, ``RotaryEmbeddingBase._compute_inv_freq``."""
    torch = lib("torch")
    return 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))


def v_cache(inv_freq: Any, length: float, mscale: float | None = None) -> Any:
    """base.py L94-103, ``_compute_cos_sin_cache``; times mscale as yarn_scaling_rope.py L76-85,
    deepseek_scaling_rope.py L103-113, phi3_long_rope_scaled_rope.py L111-123 compute it."""
    torch = lib("torch")
    t = torch.arange(length, dtype=torch.float)
    freqs = torch.einsum("i,j -> ij", t, inv_freq)
    cos, sin = freqs.cos(), freqs.sin()
    if mscale is not None:
        cos, sin = cos * mscale, sin * mscale
    return torch.cat((cos, sin), dim=-1)


def v_dynamic_base(base: float, d: int, max_position: int, trained: int, factor: float) -> float:
    """dynamic_ntk_scaling_rope.py L53-66, ``DynamicNTKScalingRotaryEmbedding._compute_cos_sin_
    cache`` (max_trained_positions: max_position, __init__.py L224-228); max_position rows."""
    return float(base * ((factor * max_position / trained) - (factor - 1)) ** (d / (d - 2)))


def yarn_find_correction_range(
    low_rot: float, high_rot: float, dim: int, base: float, max_pos: int, truncate: bool
) -> tuple[float, float]:
    """common.py L46-59, with ``yarn_find_correction_dim`` (L34-42) inline."""
    low = (dim * math.log(max_pos / (low_rot * 2 * math.pi))) / (2 * math.log(base))
    high = (dim * math.log(max_pos / (high_rot * 2 * math.pi))) / (2 * math.log(base))
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def yarn_linear_ramp_mask(low: float, high: float, dim: int) -> Any:
    """common.py L62-70 (dtype float)."""
    torch = lib("torch")
    if low == high:
        high += 0.001
    linear_func = (torch.arange(dim, dtype=torch.float) - low) / (high - low)
    return torch.clamp(linear_func, 0, 1)


def yarn_get_mscale(scale: float = 1, mscale: float = 1) -> float:
    """common.py L73-76 (deepseek_scaling_rope.py L20-23, the same)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def v_yarn_inv_freq(d: int, base: float, original: int, factor: float) -> Any:
    """yarn_scaling_rope.py L51-74, ``YaRNScalingRotaryEmbedding._compute_inv_freq``, beta_fast
    32, beta_slow 1, truncated (deepseek_scaling_rope.py L73-101, the same; L37-46: mscale)."""
    torch = lib("torch")
    pos_freqs = base ** (torch.arange(0, d, 2, dtype=torch.float) / d)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    low, high = yarn_find_correction_range(32, 1, d, base, original, True)
    inv_freq_mask = 1 - yarn_linear_ramp_mask(low, high, d // 2)
    return inv_freq_interpolation * (1 - inv_freq_mask) + inv_freq_extrapolation * inv_freq_mask


def v_deepseek_mscale(factor: float, mscale: float = 1, mscale_all_dim: float = 0) -> float:
    """deepseek_scaling_rope.py L51-55, ``DeepseekScalingRotaryEmbedding.__init__``."""
    m, m_all = float(mscale), float(mscale_all_dim)
    return float(yarn_get_mscale(factor, m) / yarn_get_mscale(factor, m_all))


def v_longrope(factors: list[float], base: float, d: int, max_pos: int, original: int) -> Any:
    """phi3_long_rope_scaled_rope.py: the mscale (L67-80) and ``_compute_inv_freq`` (L97-109)."""
    torch, scale = lib("torch"), max_pos / original
    mscale = 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(original))
    rescale_factors = torch.tensor(factors, dtype=torch.float32)
    powers = base ** (torch.arange(0, d, 2, dtype=torch.float) / d)
    return 1.0 / (rescale_factors * powers), mscale


# --- the service, and the comparison ---
def tables(answer: httpx.Response) -> Table:
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content), allow_pickle=False) as archive:
        assert archive["cos"].dtype == np.float32
        return archive["cos"].astype(np.float64), archive["sin"].astype(np.float64)


def ours(http: httpx.Client, **query: Any) -> Table:
    return tables(http.get(PATH, params={**query, "format": "npz"}))


def same(a: Table, b: Table) -> bool:
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def ratio(table: Table, cache: Any, inv: Any, attention: float, first: int = 0) -> float:
    """The largest difference from ``cache``'s rows ``first..`` over its bound (row r is
    position r), in the first halves of the service's cos and sin (their halves equal)."""
    (cos, sin), half = table, cache.shape[1] // 2
    assert cos.shape == sin.shape == (cos.shape[0], 2 * half), (cos.shape, cache.shape)
    assert same((cos[:, half:], sin[:, half:]), (cos[:, :half], sin[:, :half]))
    theirs = cache[first : first + len(cos)].double().numpy()
    rows = np.arange(first, first + len(cos), dtype=np.float64)
    bound = BOUND * (1 + np.abs(rows[:, None] * inv.double().numpy()[None, :]))
    pairs = ((cos, theirs[:, :half]), (sin, theirs[:, half:]))
    largest = max(float(np.max(np.abs(mine[:, :half] - other) / bound)) for mine, other in pairs)
    return largest / max(1.0, attention)


@pytest.fixture(scope="module")
def summary() -> Iterator[dict[str, Any]]:
    found: dict[str, Any] = {}
    yield found
    if found:
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")


def phi3(deployed: int | None) -> dict[str, Any]:
    """Phi-3-mini-128k's rope as the GET's query, with engine=vllm (and max_model_len)."""
    factors = {"short_factor": PHI3_SHORT, "long_factor": PHI3_LONG}
    deployment = {} if deployed is None else {"max_model_len": deployed}
    joined = {name: ",".join(map(repr, values)) for name, values in factors.items()}
    return {**PHI3, **PHI3_MORE, **joined, **deployment}


def test_dynamic_is_vllms_static_table(service: httpx.Client, summary: dict[str, Any]) -> None:
    base = v_dynamic_base(10000.0, 128, 4096, 4096, 2.0)
    assert base == 10000.0  # factor * 4096 / 4096 - (factor - 1) = 1: the base unchanged
    inv = v_inv_freq(base, 128)
    rope = {"head_dim": 128, "base": 10000.0, "max_len": 8192}
    dynamic = {"scaling": "dynamic", "factor": 2.0, "max_position_embeddings": 4096}
    cos, sin = ours(service, **rope, **dynamic, engine="vllm")
    found = {"rows 0..4095": ratio((cos[:4096], sin[:4096]), v_cache(inv, 4096), inv, 1.0)}
    # past vLLM's rows (transformers rescales there): the plain formula, as vLLM would go on
    assert same((cos, sin), ours(service, **rope))
    rows = (cos[4096:], sin[4096:])
    found["rows 4096..8191"] = ratio(rows, v_cache(inv, 8192), inv, 1.0, first=4096)
    summary["dynamic"] = found
    assert max(found.values()) <= 1, found


@pytest.mark.parametrize("deployed", [None, 131072], ids=["default", "131072"])
def test_longrope_picks_vllms_factors(
    service: httpx.Client, summary: dict[str, Any], deployed: int | None
) -> None:
    inv, mscale = v_longrope(PHI3_LONG if deployed else PHI3_SHORT, 10000.0, 96, 131072, 4096)
    cache = v_cache(inv, 4096 if deployed is None else 131072, mscale)
    # max_model_len default: rows 0..4095 of a table of 8192 (transformers: long factors)
    query = phi3(deployed) | {"max_len": 8192 if deployed is None else deployed}
    cos, sin = ours(service, **query)
    document = service.get(PATH, params={**query, "stop": 1, "format": "json"})
    assert document.json()["attention_factor"] == pytest.approx(mscale, rel=1e-12)
    found = ratio((cos[: len(cache)], sin[: len(cache)]), cache, inv, mscale)
    summary[f"longrope, max_model_len {deployed or 'default'}"] = {"ratio": found, "mscale": mscale}
    assert found <= 1, found


def test_yarn_is_the_same_in_both_engines(service: httpx.Client, summary: dict[str, Any]) -> None:
    inv, mscale = v_yarn_inv_freq(128, 1e6, ORIGINAL, 4.0), yarn_get_mscale(4.0)
    vllm = ours(service, **QWEN, original_max_position_embeddings=ORIGINAL, engine="vllm")
    assert same(vllm, ours(service, **QWEN, original_max_position_embeddings=ORIGINAL))
    found = ratio(vllm, v_cache(inv, ORIGINAL * 4.0, mscale), inv, mscale)
    summary["yarn"] = {"ratio": found, "mscale": mscale}
    assert found <= 1, found


@pytest.mark.parametrize("engine", ["vllm", "transformers"])
@pytest.mark.parametrize("name", list(CASES))
def test_deepseek_from_config(
    service: httpx.Client, summary: dict[str, Any], name: str, engine: str
) -> None:
    torch, rope = lib("torch"), {**DEEPSEEK, **CASES[name]}
    config = lib("transformers").DeepseekV3Config(max_position_embeddings=163840, rope_scaling=rope)
    assert (config.qk_rope_head_dim, config.rope_parameters["rope_theta"]) == (64, 10000.0)
    posted = {"json": config.to_dict(), "params": {"engine": engine, "format": "npz"}}
    table = tables(service.post(f"{PATH}/from-config", **posted))
    assert table[0].shape == (163840, 64)
    if engine == "vllm":
        inv = v_yarn_inv_freq(64, 10000.0, 4096, 40.0)
        attention = v_deepseek_mscale(40.0, **CASES[name])
        cache = v_cache(inv, 4096 * 40.0, attention)
    else:  # transformers: DeepSeek-V3's rope is plain yarn
        models = lib("transformers.models.deepseek_v3.modeling_deepseek_v3")
        module = models.DeepseekV3RotaryEmbedding(config)
        inits = lib("transformers.modeling_rope_utils").ROPE_INIT_FUNCTIONS
        inv, attention = inits["yarn"](config, "cpu")
        assert torch.equal(module.inv_freq, inv)
        assert module.attention_scaling == attention
        cos, sin = module(torch.zeros(1), torch.arange(163840)[None])  # under no_grad
        cache = torch.cat((cos[0, :, :32], sin[0, :, :32]), dim=-1)
    found = ratio(table, cache, inv, attention)
    summary[f"deepseek {name}, engine={engine}"] = {"ratio": found, "attention": attention}
    assert found <= 1, found
    if name == "mscale-only":  # vLLM: mscale over mscale_all_dim 0; transformers: factor's
        assert attention == pytest.approx(yarn_get_mscale(40, 0.707 if engine == "vllm" else 1))


@pytest.mark.parametrize("case", ["yarn", "longrope"])
def test_bfloat16_cache_is_vllms(service: httpx.Client, summary: dict[str, Any], case: str) -> None:
    """The bfloat16 table is the float32 one rounded as torch's ``.to(bfloat16)`` rounds it;
    where the float32 entry is vLLM's, the bfloat16 entry is vLLM's bit for bit; elsewhere
    (torch's float32 pow, cos and sin are not correctly rounded: entries differ within the
    bound) it is as far from vLLM's as the float32 entries are, and one bfloat16 ulp."""
    torch = lib("torch")
    if case == "yarn":
        inv = v_yarn_inv_freq(128, 1e6, ORIGINAL, 4.0)
        cache = v_cache(inv, ORIGINAL * 4.0, yarn_get_mscale(4.0))
        query = {**QWEN, "original_max_position_embeddings": ORIGINAL, "engine": "vllm"}
    else:
        inv, mscale = v_longrope(PHI3_LONG, 10000.0, 96, 131072, 4096)
        cache = v_cache(inv, 131072, mscale)
        query = phi3(131072) | {"max_len": 131072}
    half = cache.shape[1] // 2
    cos, sin = ours(service, **query, cache_dtype="bfloat16")
    got = np.concatenate([cos[:, :half], sin[:, :half]], 1)
    cos32, sin32 = ours(service, **query)
    full = np.concatenate([cos32[:, :half], sin32[:, :half]], 1)
    rounded = torch.from_numpy(full.astype(np.float32)).to(torch.bfloat16).float().double()
    assert np.array_equal(got, rounded.numpy())  # rounded to nearest, ties to even
    theirs = cache.double().numpy()
    kept = cache.to(torch.bfloat16).float().double().numpy()
    same = full == theirs
    assert np.array_equal(got[same], kept[same])
    a, b = got[~same], kept[~same]
    exponent = np.floor(np.log2(np.maximum(np.abs(a), np.abs(b))))
    # the float32 difference (within the bound, checked above) and one bfloat16 ulp (8 bits)
    apart = np.abs(full[~same] - theirs[~same])
    assert (np.abs(a - b) <= apart + 2.0 ** (exponent - 7)).all()
    summary[f"bfloat16 {case}"] = {
        "entries": int(got.size),
        "float32 entries not vLLM's": int((~same).sum()),
        "bfloat16 entries not vLLM's": int((got != kept).sum()),
    }
