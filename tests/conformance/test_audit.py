"""Conformance: the precision audit (``GET /v1/audit/rotary``, :mod:`service.audit`) against
what a model computes, in torch on CPU with transformers 5.23.0's own code (no weights).

- The paths, driven through ``LlamaRotaryEmbedding.forward`` (``models/llama/modeling_llama.py``:
  ``position_ids[..., None].float() * inv_freq.float()``, ``cat((freqs, freqs))``, ``cos`` and
  ``sin`` times ``attention_scaling``, ``.to(x.dtype)``), not re-typed: ``library``,
  ``float32-positions``: int64 (or float32) position ids; ``bf16-table``, ``fp16-table``: ``x``
  in that dtype; ``bf16-positions``, ``fp16-positions``: position ids in that dtype;
  ``bf16-frequencies``: the module ``.to(torch.bfloat16)`` (its ``inv_freq`` buffer). Not
  here: ``tf32-angles`` (no TF32 on CPU) and ``device`` (an envelope). Llama 3.1 (head_dim 128,
  rope_theta 500000, llama3: factor 8, low 1, high 4, original 8192) to max_len 32768, a plain
  rope (base 10000, head_dim 64) to 65536: ``exact_below`` is ``max_len``, and every position
  below ``every_position_below`` (16384, 32768: 2^21 entries of each pair's cos and sin) is
  evaluated.
- Error: ``|entry - exact|`` of each pair's cos and sin (``half``: columns ``:pairs``), exact
  from ``GET /v1/encodings/rotary?rounding=exact&dtype=float64`` (``test_rotary.py`` checks
  it against mpmath). torch's float32 ``cos`` and ``sin`` are not correctly rounded: within 1
  float32 ulp of the service's library table (asserted; measured, 4% of entries), so a fully
  evaluated band's max and mean error within ``2^-22`` of torch's (measured: bit for bit or
  one ulp); a sampled band's max between torch's at its first and last position (evaluated,
  ``bands.py``) and over the band. ``first_over`` and ``first_misdirected`` (an angle off by
  more than pi/2) equal torch's first (each crossing is more than 2^-22 from its threshold).
- ``first_over["1e-3"]`` of ``library`` and ``fp16-table`` (the service's float32 library
  table; it rounded by numpy) against mpmath (30 digits): every earlier position by float64
  arithmetic, with those near 1e-3 and the positions around the crossing in mpmath.

A summary is written to ``artifacts/conformance-audit.json``. Needs the conformance extra."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import httpx
import mpmath
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

F64Array = NDArray[np.float64]
ARTIFACT: Final = ROOT / "artifacts" / "conformance-audit.json"
TOLERANCE: Final = 2.0**-22  # two float32 ulps of an entry below 1
THRESHOLDS: Final = {"1e-3": 1e-3, "1e-2": 1e-2, "1e-1": 1e-1}
THRESHOLD: Final = 1e-3  # the float64 number the audit compares with
EXACT_BOUND: Final = 2.0**-51  # the exact float64 table against mpmath (conftest.py)
PATHS: Final = (
    *("library", "float32-positions", "bf16-table", "fp16-table"),
    *("bf16-positions", "fp16-positions", "bf16-frequencies"),
)
LLAMA3: Final = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0} | {
    "original_max_position_embeddings": 8192
}


@dataclass(frozen=True)
class Case:
    query: dict[str, Any]  # the table's parameters, as the service names them
    rope: dict[str, Any]  # rope_parameters, as transformers reads them
    head_dim: int
    max_len: int
    scanned: tuple[int, int]  # every_position_below, exact_below


CASES: Final = {
    "llama3.1": Case(
        {"head_dim": 128, "base": 500000.0, "scaling": "llama3", **LLAMA3},
        {"rope_theta": 500000.0, "rope_type": "llama3", **LLAMA3},
        *(128, 32768, (16384, 32768)),
    ),
    "plain": Case(
        {"head_dim": 64, "base": 10000.0}, {"rope_theta": 10000.0}, 64, 65536, (32768, 65536)
    ),
}


@functools.cache
def lib(name: str) -> Any:
    return importlib.import_module(name)


@dataclass(frozen=True)
class Measured:
    audit: dict[str, Any]
    exact: F64Array  # (max_len, 2 * pairs): each pair's cos, then its sin
    library: F64Array  # the service's float32 library table, likewise
    paths: dict[str, F64Array]  # torch's, likewise


def pairs(answer: httpx.Response, n: int) -> F64Array:
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content), allow_pickle=False) as archive:
        cos, sin = archive["cos"], archive["sin"]
    assert np.array_equal(cos[:, :n], cos[:, n:])  # half: pair k at columns k and n + k
    return np.concatenate([cos[:, :n], sin[:, :n]], axis=1).astype(np.float64)


def rotary(case: Case) -> Any:
    shape = {"head_dim": case.head_dim, "hidden_size": 4 * case.head_dim, "num_attention_heads": 4}
    kinds = {"max_position_embeddings": case.max_len, "rope_parameters": case.rope}
    config = lib("transformers").LlamaConfig(**shape, **kinds)
    return lib("transformers.models.llama.modeling_llama").LlamaRotaryEmbedding(config)


def forward(module: Any, n: int, ids: Any, dtype: Any) -> F64Array:
    torch = lib("torch")
    with torch.no_grad():
        cos, sin = module(torch.zeros(1, dtype=dtype), ids[None])
    assert cos.dtype == dtype
    both = [part[0, :, :n].float().numpy() for part in (cos, sin)]
    return np.concatenate(both, axis=1).astype(np.float64)


@functools.cache
def measure(service: httpx.Client, name: str) -> Measured:
    case, torch, n = CASES[name], lib("torch"), CASES[name].head_dim // 2
    query = {**case.query, "max_len": case.max_len}
    answer = service.get("/v1/audit/rotary", params={**query, "paths": ",".join(PATHS)})
    assert answer.status_code == 200, answer.text
    table, exact = "/v1/encodings/rotary", {"rounding": "exact", "dtype": "float64"}
    module, f32, ids = rotary(case), torch.float32, torch.arange(case.max_len)
    return Measured(
        answer.json(),
        pairs(service.get(table, params={**query, **exact, "format": "npz"}), n),
        pairs(service.get(table, params={**query, "format": "npz"}), n),
        {
            "library": forward(module, n, ids, f32),
            "float32-positions": forward(module, n, ids.float(), f32),
            "bf16-table": forward(module, n, ids, torch.bfloat16),
            "fp16-table": forward(module, n, ids, torch.float16),
            "bf16-positions": forward(module, n, ids.to(torch.bfloat16), f32),
            "fp16-positions": forward(module, n, ids.to(torch.float16), f32),
            "bf16-frequencies": forward(rotary(case).to(torch.bfloat16), n, ids, f32),
        },
    )


def errors(values: F64Array, exact: F64Array) -> tuple[F64Array, NDArray[np.bool_]]:
    """Each entry's error (2 if not finite), and whether a position's angle is off by > pi/2."""
    n = values.shape[1] // 2
    broken = ~np.isfinite(values)
    with np.errstate(invalid="ignore"):
        error: F64Array = np.where(broken, 2.0, np.abs(values - exact))
        turned = np.arctan2(values[:, n:], values[:, :n]) - np.arctan2(exact[:, n:], exact[:, :n])
        wrapped = np.abs((turned + np.pi) % (2 * np.pi) - np.pi)
    wrong: NDArray[np.bool_] = np.any((wrapped > np.pi / 2) | broken[:, :n] | broken[:, n:], 1)
    return error, wrong


def by_name(audit: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {path["name"]: path for path in audit["paths"]}


def first(where: NDArray[np.bool_]) -> int | None:
    hits = np.flatnonzero(where)
    return int(hits[0]) if len(hits) else None


@pytest.fixture(scope="module")
def summary() -> Iterator[dict[str, Any]]:
    found: dict[str, Any] = {}
    yield found
    if found:
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", list(CASES))
def test_torch_float32_is_the_library_table_within_an_ulp(
    service: httpx.Client, summary: dict[str, Any], name: str
) -> None:
    measured, scanned = measure(service, name), CASES[name].scanned
    assert (measured.audit["every_position_below"], measured.audit["exact_below"]) == scanned
    theirs, ours = measured.paths["library"], measured.library
    gap = np.abs(theirs - ours) / np.spacing(np.abs(ours).astype(np.float32))
    found = {"largest, float32 ulps": float(gap.max()), "entries": int(gap.size)}
    found["not bit for bit"] = int(np.count_nonzero(theirs != ours))
    summary[f"{name}: torch float32 vs service library"] = found
    assert found["largest, float32 ulps"] <= 1, found


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", list(CASES))
def test_audit_is_torchs(
    service: httpx.Client, summary: dict[str, Any], name: str, path: str
) -> None:
    measured = measure(service, name)
    every, answer = CASES[name].scanned[0], by_name(measured.audit)[path]
    error, wrong = errors(measured.paths[path], measured.exact)
    row = error.max(axis=1)
    gaps: dict[str, Any] = {"max": 0.0, "mean": 0.0, "bands bit for bit": 0}
    for band in answer["bands"]:
        start, stop, largest = band["start"], band["stop"], band["max_error"]
        assert 0 <= band["mean_error"] <= largest
        if stop <= every:  # every position evaluated
            assert band["samples"] == stop - start
            gap = abs(largest - float(row[start:stop].max()))
            gaps["max"] = max(gaps["max"], gap)
            gaps["bands bit for bit"] += int(gap <= 1e-12)
            mean = abs(band["mean_error"] - float(error[start:stop].mean()))
            gaps["mean"] = max(gaps["mean"], mean)
        else:  # sampled, its first and last position among them
            assert 0 < band["samples"] < stop - start
            assert largest <= float(row[start:stop].max()) + TOLERANCE, band
            assert largest >= max(row[start], row[stop - 1]) - TOLERANCE, band
    crossings = {label: first(row > threshold) for label, threshold in THRESHOLDS.items()}
    for label, threshold in THRESHOLDS.items():
        at = crossings[label]
        assert answer["first_over"][label] == at, (label, answer["first_over"], at)
        if at is not None:  # how far from the threshold (more than 2^-22: no ulp shifts it)
            below = float(row[:at].max()) if at else 0.0
            gaps[f"margin {label}"] = min(float(row[at]) - threshold, threshold - below)
    assert answer["first_misdirected"] == first(wrong)
    gaps |= {"first_over": crossings, "first_misdirected": first(wrong)}
    summary[f"{name}: {path} vs torch"] = gaps
    assert gaps["max"] <= TOLERANCE, gaps
    assert gaps["mean"] <= TOLERANCE, gaps


def exact_frequencies(rope: dict[str, Any], d: int) -> list[Any]:
    """``modeling_rope_utils.py``'s inverse frequencies (default, llama3) in mpmath."""
    mpf = mpmath.mpf
    w = [mpf(rope["rope_theta"]) ** (mpf(-2 * k) / d) for k in range(d // 2)]
    if rope.get("rope_type") != "llama3":
        return w
    factor, original = mpf(rope["factor"]), mpf(rope["original_max_position_embeddings"])
    low, high = mpf(rope["low_freq_factor"]), mpf(rope["high_freq_factor"])
    scaled = []
    for x in w:  # long wavelengths / factor, short ones kept, a smooth blend between
        wavelength = 2 * mpmath.pi / x
        smooth = min(max((original / wavelength - low) / (high - low), 0), 1)
        scaled.append((1 - smooth) * x / factor + smooth * x)
    return scaled


def mp_error(values: F64Array, frequencies: list[Any], position: int) -> Any:
    """The largest |entry - exact| of one position's row, in mpmath."""
    n, found = len(frequencies), mpmath.mpf(0)
    for k, w in enumerate(frequencies):
        cos, sin = mpmath.cos_sin(position * w)
        found = max(found, abs(mpmath.mpf(values[k]) - cos), abs(mpmath.mpf(values[n + k]) - sin))
    return found


@pytest.mark.parametrize(
    ("name", "path"), [(n, p) for n in CASES for p in ("library", "fp16-table")]
)
def test_first_crossing_against_mpmath(
    service: httpx.Client, summary: dict[str, Any], name: str, path: str
) -> None:
    measured, case = measure(service, name), CASES[name]
    at = by_name(measured.audit)[path]["first_over"]["1e-3"]
    assert at is not None
    values = measured.library[: at + 1]  # the service's float32 library table
    if path == "fp16-table":
        values = values.astype(np.float32).astype(np.float16).astype(np.float64)
    with mpmath.workdps(30):
        frequencies = exact_frequencies(case.rope, case.head_dim)
        w_hi = np.array([float(w) for w in frequencies])
        w_lo = np.array([float(w - mpmath.mpf(h)) for w, h in zip(frequencies, w_hi, strict=True)])
    positions = np.arange(at + 1, dtype=np.float64)[:, None]
    angle = positions * w_hi + positions * w_lo
    row = np.abs(values - np.concatenate([np.cos(angle), np.sin(angle)], axis=1)).max(axis=1)
    # the float64 angle within 2^-52 angle of p w, cos and sin 2^-52 more: 2^-50 (1 + angle)
    slack = 2.0**-50 * (1 + float(angle.max()))
    unsure = np.flatnonzero(np.abs(row[:at] - THRESHOLD) <= slack)  # mpmath decides them
    assert len(unsure) <= 16, unsure
    assert row[:at].max() <= THRESHOLD + slack
    worst = np.argsort(row[:at])[-4:]
    checked = sorted({*unsure.tolist(), *worst.tolist(), *range(max(0, at - 4), at + 1)})
    found: dict[str, Any] = {"first over 1e-3": at, "positions in mpmath": len(checked)}
    found["float64 vs mpmath"] = found["service exact vs mpmath"] = 0.0
    with mpmath.workdps(30):
        for position in checked:
            largest = mp_error(values[position], frequencies, position)
            assert (largest > mpmath.mpf(THRESHOLD)) == (position == at), (position, largest)
            gap = abs(float(largest) - float(row[position]))
            found["float64 vs mpmath"] = max(found["float64 vs mpmath"], gap)
            off = float(mp_error(measured.exact[position], frequencies, position))
            found["service exact vs mpmath"] = max(found["service exact vs mpmath"], off)
    found |= {"float64 slack": slack, "at it": float(row[at]), "below": float(row[:at].max())}
    summary[f"{name}: {path} first over 1e-3 vs mpmath"] = found
    assert found["float64 vs mpmath"] <= slack, found
    assert found["service exact vs mpmath"] <= EXACT_BOUND, found
