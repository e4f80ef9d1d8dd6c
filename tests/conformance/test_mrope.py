"""Conformance: M-RoPE's rows at three-axis position ids against transformers' own rotary
modules, built from configs (no weights): Qwen2-VL's ``Qwen2VLRotaryEmbedding`` (sections in
order) and Qwen3-VL's ``Qwen3VLTextRotaryEmbedding`` (interleaved), transformers 5.23.0
(``models/qwen2_vl/modeling_qwen2_vl.py``, ``models/qwen3_vl/modeling_qwen3_vl.py``:
``recomposition_frequencies``). ``rounding=library``: every entry within ``2^-22 (1 +
|angle|)`` (torch's float32 cos and sin are not correctly rounded), through ``POST
/v1/encodings/rotary/positions``. Needs the conformance extra."""

from __future__ import annotations

import importlib
import importlib.util
import io
import os
from typing import Any, Final

import httpx
import numpy as np
import pytest

from tests.support import npy_bytes

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

BOUND: Final = 2.0**-22
CASES: Final = (
    ("qwen2_vl", "Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding", 128, (16, 24, 24), False, 1e6),
    ("qwen3_vl", "Qwen3VLTextConfig", "Qwen3VLTextRotaryEmbedding", 128, (24, 20, 20), True, 5e6),
    ("qwen2_vl", "Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding", 64, (8, 12, 12), False, 1e4),
)


def theirs(case: tuple[Any, ...], ids: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    torch = importlib.import_module("torch")
    module, config_name, rotary_name, head_dim, sections, _, base = case
    transformers = importlib.import_module("transformers")
    config = getattr(transformers, config_name)(
        hidden_size=head_dim * 4,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=1 << 20,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": base,
            "mrope_section": list(sections),
        },
    )
    models = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    rotary = getattr(models, rotary_name)(config)
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1), torch.from_numpy(ids)[:, None, :])
    return cos[0].numpy().astype(np.float64), sin[0].numpy().astype(np.float64)


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case[0]}-d{case[3]}")
def test_rows_at_three_axis_ids_match_transformers(
    service: httpx.Client, case: tuple[Any, ...]
) -> None:
    _, _, _, head_dim, sections, interleaved, base = case
    rng = np.random.default_rng(head_dim)
    ids = np.stack(
        [rng.integers(0, 1 << 16, 200), rng.integers(0, 256, 200), rng.integers(0, 256, 200)]
    )
    query = {
        "max_len": 1 << 20,
        "head_dim": head_dim,
        "base": base,
        "mrope_section": ",".join(map(str, sections)),
        "mrope_interleaved": str(interleaved).lower(),
        "format": "npz",
    }
    answer = service.post(
        "/v1/encodings/rotary/positions",
        params=query,
        content=npy_bytes(ids.astype(np.int64)),
        headers={"content-type": "application/x-npy"},
    )
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content)) as archive:
        ours = {name: archive[name].astype(np.float64) for name in ("cos", "sin")}
    cos, sin = theirs(case, ids)
    inverse = 1.0 / base ** (np.arange(0, head_dim, 2) / head_dim)
    angle = np.max(ids, axis=0)[:, None] * np.tile(inverse, 2)[None, :]
    bound = BOUND * (1 + angle)
    for name, other in (("cos", cos), ("sin", sin)):
        assert ours[name].shape == other.shape
        excess = np.abs(ours[name] - other) / bound
        assert excess.max() <= 1, (name, float(excess.max()))
