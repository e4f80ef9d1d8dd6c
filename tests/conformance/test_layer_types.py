"""Conformance: ``POST /v1/encodings/rotary/from-config`` for configs whose rope parameters are
per layer type, against transformers' own rotary modules, transformers 5.23.0:
``Gemma3RotaryEmbedding`` (``models/gemma3/modeling_gemma3.py``; its config
``Gemma3TextConfig``, ``models/gemma3/configuration_gemma3.py``, converting the older
``rope_theta``, ``rope_local_base_freq`` and ``rope_scaling`` in
``convert_rope_params_to_dict``) and ``Gemma4TextRotaryEmbedding``
(``models/gemma4/modeling_gemma4.py``; ``Gemma4TextConfig``, whose full-attention layers have
the proportional rope and the ``global_head_dim`` head, ``per_layer_config``), each built
from its config (no weights), ``forward(x, position_ids, layer_type)`` at positions 0..2047.
The configs posted: Gemma 3's older fields, the same config's ``to_dict()`` (transformers 5:
``rope_parameters`` per layer type and ``layer_types``), Gemma 4's ``to_dict()`` and its
fields as a Hub config.json writes them (``global_head_dim``), and a multimodal
``Gemma3Config(text_config=...).to_dict()``. ``rounding=library``: every entry within ``2^-22
(1 + |angle|)``, ``angle = position * inv_freq`` (the module's ``{layer_type}_inv_freq``);
``X-Layer-Types`` names each layer's type; ``layer_type=`` answers that type's table alone.
``rounding=exact`` against the formulas in mpmath at 50 digits, as ``test_rotary.py``: half a
float32 ulp + 2^-48 |value| + 2^-100 |angle|. A summary is written to
``artifacts/conformance-layer-types.json``. Needs the conformance extra."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import json
import os
from collections.abc import Iterator
from typing import Any, Final

import httpx
import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray

from tests.conformance import reference
from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

F64Array = NDArray[np.float64]
PATH: Final = "/v1/encodings/rotary/from-config"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-layer-types.json"
BOUND: Final = 2.0**-22
RELATIVE_SLACK: Final = 2.0**-48
FREQUENCY_ERROR: Final = 2.0**-100
MAX_LEN: Final = 2048
EXACT_POSITIONS: Final = (0, 1, 2, 3, 17, 255, 1000, 2047)
GEMMA3: Final = {
    "head_dim": 64,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "rope_theta": 1e6,
    "rope_local_base_freq": 1e4,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "num_hidden_layers": 12,
    "sliding_window_pattern": 6,
    "max_position_embeddings": 4096,
}
GEMMA4: Final = {"head_dim": 64, "global_head_dim": 128, "num_hidden_layers": 6}
CASES: Final = ("gemma3-fields", "gemma3", "gemma3-multimodal", "gemma4", "gemma4-hub")


@functools.cache
def lib(name: str) -> Any:
    return importlib.import_module(name)


def case(name: str) -> tuple[dict[str, Any], Any, Any]:
    """The config posted, the text config transformers reads, and its rotary module."""
    transformers = lib("transformers")
    gemma3 = lib("transformers.models.gemma3.modeling_gemma3").Gemma3RotaryEmbedding
    gemma4 = lib("transformers.models.gemma4.modeling_gemma4").Gemma4TextRotaryEmbedding
    if name.startswith("gemma3"):
        text = transformers.Gemma3TextConfig(**GEMMA3)
        posted = {"model_type": "gemma3_text", **GEMMA3} if name == "gemma3-fields" else None
        if name == "gemma3-multimodal":
            whole = transformers.Gemma3Config(text_config=text.to_dict())
            posted, text = whole.to_dict(), whole.text_config
        return posted or text.to_dict(), text, gemma3(text)
    text = transformers.Gemma4TextConfig(**GEMMA4)
    assert text.rope_parameters["full_attention"]["rope_type"] == "proportional"
    posted = text.to_dict()
    if name == "gemma4-hub":  # the builder's field, not transformers 5.23's per_layer_config
        posted = {k: v for k, v in posted.items() if k != "per_layer_config"} | {
            "global_head_dim": GEMMA4["global_head_dim"]
        }
    return posted, text, gemma4(text)


def theirs(module: Any, layer_type: str) -> tuple[F64Array, F64Array, F64Array, float]:
    """cos, sin at positions 0..MAX_LEN-1, the angles (float64 of the module's float32
    frequencies, ``cat(freqs, freqs)``) and the attention factor."""
    torch = lib("torch")
    positions = torch.arange(MAX_LEN)[None]
    with torch.no_grad():
        cos, sin = module(torch.zeros(1), positions, layer_type)
    inv = getattr(module, f"{layer_type}_inv_freq").numpy().astype(np.float64)
    angles = np.arange(MAX_LEN, dtype=np.float64)[:, None] * np.tile(inv, 2)[None, :]
    attention = float(getattr(module, f"{layer_type}_attention_scaling"))
    as64 = np.float64
    return cos[0].numpy().astype(as64), sin[0].numpy().astype(as64), angles, attention


def ours(http: httpx.Client, config: dict[str, Any], **params: Any) -> httpx.Response:
    answer = http.post(PATH, json=config, params={"format": "npz", "max_len": MAX_LEN, **params})
    assert answer.status_code == 200, answer.text
    return answer


def members(answer: httpx.Response) -> dict[str, NDArray[Any]]:
    with np.load(io.BytesIO(answer.content), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


@pytest.fixture(scope="module")
def summary() -> Iterator[dict[str, Any]]:
    found: dict[str, Any] = {}
    yield found
    if found:
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", CASES)
def test_every_layer_types_table_matches_transformers(
    service: httpx.Client, summary: dict[str, Any], name: str
) -> None:
    posted, text, module = case(name)
    json.dumps(posted)  # a config.json as it is
    answer = ours(service, posted)
    assert answer.headers["x-layer-types"] == ", ".join(text.layer_types)
    tables = members(answer)
    kinds = sorted(set(text.layer_types))
    assert sorted(tables) == sorted(f"{kind}/{part}" for kind in kinds for part in ("cos", "sin"))
    failures, found = [], {}
    for kind in kinds:
        cos, sin, angles, attention = theirs(module, kind)
        bound = BOUND * (1 + np.abs(angles)) * max(1.0, attention)
        found[kind] = {"rotary_dim": cos.shape[1], "largest_difference": 0.0, "ratio": 0.0}
        for part, other in (("cos", cos), ("sin", sin)):
            values = tables[f"{kind}/{part}"]
            assert values.dtype == np.float32
            assert values.shape == other.shape, (kind, part, values.shape, other.shape)
            difference = np.abs(values.astype(np.float64) - other)
            ratio = float(np.max(difference / bound))
            found[kind]["largest_difference"] = max(
                found[kind]["largest_difference"], float(difference.max())
            )
            found[kind]["ratio"] = max(found[kind]["ratio"], ratio)
            if ratio > 1:
                row, column = np.unravel_index(int(np.argmax(difference / bound)), bound.shape)
                failures.append(f"{kind}/{part} at position {row}, column {column}: {ratio:.3g}")
        # the type asked alone: the same table, bit for bit
        alone = members(ours(service, posted, layer_type=kind))
        assert sorted(alone) == ["cos", "sin"]
        for part in ("cos", "sin"):
            np.testing.assert_array_equal(alone[part], tables[f"{kind}/{part}"])
    summary[name] = found
    assert not failures, failures


def exact(frequencies: list[Any], positions: tuple[int, ...]) -> tuple[reference.Exact, ...]:
    """cos and sin of each position times each frequency, to 50 digits (double-doubles)."""
    shape = (len(positions), len(frequencies))
    arrays = {key: np.zeros(shape) for key in ("cos_hi", "cos_lo", "sin_hi", "sin_lo", "angle")}
    with mpmath.workdps(reference.DIGITS):
        for i, position in enumerate(positions):
            for k, frequency in enumerate(frequencies):
                theta = position * frequency
                for part, value in zip(("cos", "sin"), mpmath.cos_sin(theta), strict=True):
                    arrays[f"{part}_hi"][i, k] = hi = float(value)
                    arrays[f"{part}_lo"][i, k] = float(value - hi)
                arrays["angle"][i, k] = float(theta)
    return tuple(
        reference.Exact(arrays[f"{part}_hi"], arrays[f"{part}_lo"], arrays["angle"])
        for part in ("cos", "sin")
    )


def test_exact_tables_match_mpmath(service: httpx.Client, summary: dict[str, Any]) -> None:
    """Gemma 3's older fields, ``rounding=exact``: each type's frequencies
    ``rope_theta^(-2k/d)`` (over the linear factor) from the parameters transformers converted
    them to, and cos and sin of position times frequency, within half a float32 ulp."""
    posted, text, _ = case("gemma3-fields")
    tables = members(ours(service, posted, rounding="exact"))
    rows = np.array(EXACT_POSITIONS)
    d, failures, found = text.head_dim, [], {}
    for kind, rope in sorted(text.rope_parameters.items()):
        assert rope["rope_type"] in ("default", "linear"), rope
        factor = rope.get("factor", 1.0) if rope["rope_type"] == "linear" else 1.0
        with mpmath.workdps(reference.DIGITS):
            base = mpmath.mpf(rope["rope_theta"])
            frequencies = [base ** (mpmath.mpf(-2 * k) / d) / factor for k in range(d // 2)]
        largest = 0.0
        for part, truth in zip(("cos", "sin"), exact(frequencies, EXACT_POSITIONS), strict=True):
            values = tables[f"{kind}/{part}"].astype(np.float64)[rows]
            assert np.array_equal(values[:, d // 2 :], values[:, : d // 2])  # half: pair k twice
            difference = reference.error(values[:, : d // 2], truth)
            bound = (
                reference.half_ulp32(truth)
                + RELATIVE_SLACK * np.abs(truth.hi)
                + FREQUENCY_ERROR * np.abs(truth.angle)
            )
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(difference == 0, 0.0, difference / bound)
            largest = max(largest, float(ratio.max()))
            if ratio.max() > 1:
                failures.append(f"{kind}/{part}: {float(ratio.max()):.3g} of the bound")
        found[kind] = {"ratio": largest}
    summary["gemma3-fields, exact vs mpmath"] = found
    assert not failures, failures
