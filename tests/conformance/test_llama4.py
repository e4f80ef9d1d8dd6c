"""Conformance: Llama 4 against transformers 5.23.0's own code (``models/llama4/``), built from
configs (no weights):

- ``GET /v1/encodings/temperature``, the query scale of the layers without RoPE, against the
  real ``Llama4TextAttention.forward`` (``modeling_llama4.py``: with
  ``attn_temperature_tuning``, ``attn_scales = log1p(floor((positions.float() + 1.0) /
  floor_scale)) * attn_scale + 1.0``, ``positions = arange(seq) + past_seen_tokens``), driven,
  not re-typed: layer 3 (a NoPE layer) of a ``Llama4TextConfig`` one wide (``floor_scale`` and
  ``attn_scale`` the defaults, 8192 and 0.1), its query projection 1, its attention function
  an ``AttentionInterface`` that records the scaled query; positions 0..2^20-1 in one
  prefill, and blocks of 2^16 up to 2^31-1 behind a stand-in cache reporting that many past
  tokens. ``rounding=library``: bit for bit with the torch engine (torch's log1p);
  ``rounding=exact``: within 1 float32 ulp of the float64 formula.
- ``POST /v1/encodings/temperature/from-config``: ``X-Layer-Types`` is ``rope`` or ``nope``
  for each of ``Llama4TextConfig.no_rope_layers`` (``configuration_llama4.py``,
  ``__post_init__``: given, else ``int((i + 1) % no_rope_layer_interval != 0)``, also for an
  empty list), from ``Llama4Config(text_config=...).to_dict()`` and text configs'
  ``to_dict()``; the scales are the GET's with the config's ``floor_scale`` and ``attn_scale``.
- ``POST /v1/encodings/rotary/from-config`` of a Llama 4 text config (plain, and llama3 rope
  scaling: factor 8, and Llama 4 Scout's factor 16 with low and high frequency factors 1, as
  Meta's ``llama-models`` ``models/llama4/args.py`` sets them) against
  ``Llama4TextRotaryEmbedding`` (``freqs_cis = polar(1, position * inv_freq) *
  attention_scaling``, which ``apply_rotary_emb`` multiplies into pairs (2k, 2k + 1)): cos
  ``freqs_cis.real`` and sin ``freqs_cis.imag`` of pair k at the service's columns 2k and
  2k + 1 (its Llama 4 default, ``interleaved``), within ``2^-22 (1 + |angle|)``, at positions
  0..4095 and 100000..100063.

A summary is written to ``artifacts/conformance-llama4.json``. Needs the conformance extra."""

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
import numpy as np
import pytest
from numpy.typing import NDArray

from service.encodings import kernels
from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

TEMPERATURE: Final = "/v1/encodings/temperature"
ROTARY: Final = "/v1/encodings/rotary/from-config"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-llama4.json"
BOUND: Final = 2.0**-22
CEILING: Final = 1 << 31  # max_len: positions up to 2^31 - 1
# (first position, count): one prefill from 0, then past lengths around 2^24 (where
# positions.float() starts rounding) and up to the last position, 2^31 - 1
WIDE: Final = 1 << 16
BLOCKS: Final = [(0, 1 << 20), ((1 << 24) - (1 << 15), WIDE), (123_456_789, WIDE)]
BLOCKS_FAR: Final = [(1 << 30, WIDE), (CEILING - WIDE, WIDE)]
SCALED: Final = {"rope_type": "llama3", "original_max_position_embeddings": 8192}
ROPES: Final = {
    "plain": None,
    "llama3-factor-8": {**SCALED, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    "scout": {**SCALED, "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0},
}
ROWS: Final = ((0, 4096, 4096), (100_000, 100_064, 1 << 20))  # start, stop, max_len
CAPTURED: Final[dict[str, Any]] = {}


@functools.cache
def lib(name: str) -> Any:
    return importlib.import_module(name)


def capture(module: Any, query: Any, key: Any, value: Any, mask: Any, **kw: Any) -> Any:
    """An attention function that keeps the query it is given (the scaled one)."""
    CAPTURED["query"] = query.detach().clone()
    batch, heads, length, width = query.shape
    return lib("torch").zeros(batch, length, heads, width), None


class PastLength:
    """A stand-in cache: ``past`` tokens seen already, nothing kept."""

    def __init__(self, past: int) -> None:
        self.past = past

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.past

    def update(self, key: Any, value: Any, layer_idx: int) -> tuple[Any, Any]:
        return key, value


@functools.cache
def attention() -> Any:
    """Layer 3 of a tiny Llama 4, without RoPE; query = the scale times hidden state 1."""
    transformers, torch = lib("transformers"), lib("torch")
    transformers.AttentionInterface.register("conformance_capture", capture)
    one = {"hidden_size": 1, "head_dim": 1, "num_attention_heads": 1, "num_key_value_heads": 1}
    config = transformers.Llama4TextConfig(**one, num_hidden_layers=4)
    config._attn_implementation = "conformance_capture"
    models = lib("transformers.models.llama4.modeling_llama4")
    layer = models.Llama4TextAttention(config, 3).eval()
    assert not layer.use_rope
    assert layer.attn_temperature_tuning
    with torch.no_grad():
        layer.q_proj.weight.fill_(1.0)
    return layer


def forward(past: int, count: int) -> NDArray[np.float32]:
    """The forward pass's scales at positions past .. past + count - 1."""
    torch, layer = lib("torch"), attention()
    with torch.no_grad():
        hidden = torch.ones(1, count, 1)
        layer(hidden, None, None, past_key_values=PastLength(past) if past else None)
    scales: NDArray[np.float32] = CAPTURED["query"][0, 0, :, 0].numpy()
    return scales


def scales(answer: httpx.Response) -> NDArray[np.float32]:
    assert answer.status_code == 200, answer.text
    found: NDArray[np.float32] = np.load(io.BytesIO(answer.content), allow_pickle=False)
    assert found.dtype == np.float32
    assert found.shape[1:] == (1,)
    return found[:, 0]


def ulps(a: NDArray[np.float32], b: NDArray[np.float32]) -> NDArray[np.int64]:
    """How many float32 steps apart (the scales are positive)."""
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


@pytest.fixture(scope="module")
def summary() -> Iterator[dict[str, Any]]:
    found: dict[str, Any] = {}
    yield found
    if found:
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize(("past", "count"), [*BLOCKS, *BLOCKS_FAR], ids=lambda v: str(v))
def test_temperature_is_llama4_attentions(
    service: httpx.Client, summary: dict[str, Any], past: int, count: int
) -> None:
    config = attention().config
    floor_scale, attn_scale = config.floor_scale, config.attn_scale
    assert (floor_scale, attn_scale) == (8192, 0.1)
    theirs = forward(past, count)
    assert theirs.shape == (count,)
    query: dict[str, Any] = {"max_len": CEILING, "start": past, "stop": past + count}
    query |= {"format": "npy"}
    query |= {"floor_scale": floor_scale, "attn_scale": attn_scale}
    library = scales(service.get(TEMPERATURE, params=query))
    exact = scales(service.get(TEMPERATURE, params={**query, "rounding": "exact"}))
    positions = np.arange(past, past + count, dtype=np.int64)
    truth = np.log1p(np.floor((positions + 1) / floor_scale)) * attn_scale + 1.0
    off = np.abs(exact.astype(np.float64) - truth) / np.spacing(truth.astype(np.float32))
    found: dict[str, Any] = {"library vs forward, ulps": int(ulps(library, theirs).max())}
    found["library entries not bit for bit"] = int(np.count_nonzero(library != theirs))
    found["exact vs float64, ulps"] = float(off.max())
    found["largest scale"] = float(theirs.max())
    summary[f"temperature from {past}"] = found
    assert found["library vs forward, ulps"] <= 1, found
    assert found["exact vs float64, ulps"] <= 1, found
    if kernels.engine() == "torch":  # torch's own log1p
        assert found["library entries not bit for bit"] == 0, found


@pytest.mark.parametrize(("floor_scale", "attn_scale"), [(1000, 0.3), (3, 0.7), (4096, 0.25)])
def test_temperature_with_other_parameters(
    service: httpx.Client, summary: dict[str, Any], floor_scale: int, attn_scale: float
) -> None:
    """The forward's expression (``Llama4TextAttention.forward``) in torch, as the layer
    evaluates it, at other parameters than the config's defaults: within 2 float32 ulps
    (torch's float32 log1p and the service's correctly rounded one can differ)."""
    torch = lib("torch")
    positions = torch.arange(1 << 20)
    floors = torch.floor((positions.float() + 1.0) / floor_scale)
    theirs = (torch.log1p(floors) * attn_scale + 1.0).numpy()
    query = {"max_len": 1 << 20, "floor_scale": floor_scale, "attn_scale": attn_scale}
    library = scales(service.get(TEMPERATURE, params={**query, "format": "npy"}))
    found = {"ulps": int(ulps(library, theirs).max())}
    found["not bit for bit"] = int(np.count_nonzero(library != theirs))
    summary[f"temperature floor_scale={floor_scale} attn_scale={attn_scale}"] = found
    assert found["ulps"] <= 2, found
    if kernels.engine() == "torch":  # torch's own log1p
        assert found["not bit for bit"] == 0, found


def layer_case(name: str) -> tuple[dict[str, Any], Any]:
    """The config posted, and the text config transformers reads from it."""
    transformers = lib("transformers")
    if name == "llama4":  # the multimodal config.json, default 48 layers
        whole = transformers.Llama4Config(text_config=transformers.Llama4TextConfig().to_dict())
        return whole.to_dict(), whole.text_config
    if name == "interval-3":  # as a config.json without the list: the interval says
        text = transformers.Llama4TextConfig(num_hidden_layers=10, no_rope_layer_interval=3)
        return {k: v for k, v in text.to_dict().items() if k != "no_rope_layers"}, text
    if name == "empty-list":  # Llama 4 Scout's config.json: "no_rope_layers": []
        text = transformers.Llama4TextConfig(no_rope_layers=[], num_hidden_layers=12)
        return text.to_dict() | {"no_rope_layers": []}, text
    explicit = {"no_rope_layers": [1, 0, 0, 1, 1, 0], "num_hidden_layers": 6}
    text = transformers.Llama4TextConfig(**explicit, floor_scale=4096, attn_scale=0.25)
    return text.to_dict(), text


@pytest.mark.parametrize("name", ["llama4", "interval-3", "empty-list", "explicit"])
def test_temperature_from_config(service: httpx.Client, name: str) -> None:
    posted, text = layer_case(name)
    json.dumps(posted)  # a config.json as it is
    kinds = ["rope" if use_rope else "nope" for use_rope in text.no_rope_layers]
    assert len(kinds) == text.num_hidden_layers
    answer = service.post(f"{TEMPERATURE}/from-config", json=posted, params={"format": "npy"})
    assert answer.headers["x-layer-types"] == ", ".join(kinds)
    query: dict[str, Any] = {"floor_scale": text.floor_scale, "attn_scale": text.attn_scale}
    query["format"] = "npy"
    query["max_len"] = text.max_position_embeddings
    expected = scales(service.get(TEMPERATURE, params=query))
    found = scales(answer)
    assert found.shape == (text.max_position_embeddings,)
    assert np.array_equal(found.view(np.int32), expected.view(np.int32))


@pytest.mark.parametrize("name", list(ROPES))
def test_rotary_from_config_is_llama4s(
    service: httpx.Client, summary: dict[str, Any], name: str
) -> None:
    transformers, torch = lib("transformers"), lib("torch")
    text = transformers.Llama4TextConfig(rope_theta=500000.0, rope_scaling=ROPES[name])
    assert text.rope_parameters["rope_type"] == ("default" if name == "plain" else "llama3")
    posted = text.to_dict()
    if name == "scout":  # as the Hub's config.json: the multimodal one
        posted = transformers.Llama4Config(text_config=posted).to_dict()
    module = lib("transformers.models.llama4.modeling_llama4").Llama4TextRotaryEmbedding(text)
    inv = module.inv_freq.numpy().astype(np.float64)
    kinds = ", ".join("rope" if use_rope else "nope" for use_rope in text.no_rope_layers)
    found = {"ratio": 0.0, "attention_scaling": float(module.attention_scaling)}
    for start, stop, max_len in ROWS:
        query: dict[str, Any] = {"max_len": max_len, "start": start, "stop": stop}
        query["format"] = "npz"
        answer = service.post(ROTARY, json=posted, params=query)
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-layer-types"] == kinds
        with np.load(io.BytesIO(answer.content), allow_pickle=False) as archive:
            ours = {part: archive[part].astype(np.float64) for part in ("cos", "sin")}
        freqs_cis = module(torch.zeros(1), torch.arange(start, stop)[None])[0]
        assert freqs_cis.dtype == torch.complex64
        theirs = {"cos": freqs_cis.real.double().numpy(), "sin": freqs_cis.imag.double().numpy()}
        angle = np.arange(start, stop, dtype=np.float64)[:, None] * inv[None, :]
        bound = BOUND * (1 + np.abs(angle)) * max(1.0, module.attention_scaling)
        for part in ("cos", "sin"):
            assert ours[part].shape == (stop - start, text.head_dim)
            pairs = ours[part][:, 0::2]  # interleaved: pair k at columns 2k and 2k + 1
            assert np.array_equal(pairs, ours[part][:, 1::2])
            ratio = float(np.max(np.abs(pairs - theirs[part]) / bound))
            found["ratio"] = max(found["ratio"], ratio)
    summary[f"rotary {name}"] = found
    assert found["ratio"] <= 1, found
