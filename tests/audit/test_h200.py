"""The audit's paths against tables a real GPU made (``../shared/reference/cuda``: an H200,
torch 2.11, transformers 5.17): the ``bf16-table`` path is the GPU's bfloat16 table bit for
bit wherever the GPU's inverse frequencies are the CPU's, and every entry the GPU computed
in float32 lies inside the ``device`` envelope (the margin measured here is in the docs):
transformers' rotary tables and diffusers' timestep embeddings."""

from __future__ import annotations

import json
from typing import Any, Final

import numpy as np
import pytest

from service.audit import envelope, paths
from service.encodings import rope_nd, timestep
from service.encodings.rotary import RotaryKey
from service.encodings.timestep import TimestepKey
from service.schemas.mrope import RopeQuery
from tests.support import ROOT

CUDA: Final = ROOT.parent / "shared" / "reference" / "cuda"
SEQUENCE: Final = 16777248  # every position in one forward: dynamic's and longrope's length
# the envelope's margin over the GPU: its largest error over the envelope, measured
MARGINS: Final = {"llama31": 0.66, "dynamic": 0.57, "longrope": 0.86}

pytestmark = pytest.mark.skipif(not CUDA.is_dir(), reason=f"no GPU tables at {CUDA}")


def key_of(case: str) -> RotaryKey:
    found = json.loads((CUDA / "info.json").read_text())["cases"][case]
    rope = dict(found["rope"])
    query: dict[str, Any] = {
        "head_dim": found["head_dim"],
        "base": rope.pop("rope_theta"),
        "scaling": rope.pop("rope_type"),
        "max_len": SEQUENCE,
    }
    query |= {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in rope.items()}
    if query["scaling"] in ("dynamic", "longrope"):
        query["max_position_embeddings"] = found["mpe"]
    return RopeQuery.model_validate(query).key()


def widened(bits: Any) -> Any:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("case", list(MARGINS))
def test_the_bf16_table_is_the_gpus(case: str) -> None:
    key = key_of(case)
    with np.load(CUDA / f"rope_{case}.npz", allow_pickle=False) as tables:
        positions = tables["positions"].astype(np.int64)
        bf16 = [widened(tables["cuda_bf16_cos"]), widened(tables["cuda_bf16_sin"])]
        agree = tables["cuda_inv_freq"] == tables["cpu_inv_freq"]
    ours = {path.name: path for path in paths.COMMON}["bf16-table"].values(key, positions)
    theirs = np.concatenate(bf16, 1)
    columns = np.concatenate([agree, agree])
    assert columns.any()  # dynamic: 5 of 64 agree (its base is recomputed on the device)
    assert np.array_equal(ours[:, columns], theirs[:, columns])


@pytest.mark.parametrize("case", list(MARGINS))
def test_every_gpu_entry_is_inside_the_device_envelope(case: str) -> None:
    key = key_of(case)
    with np.load(CUDA / f"rope_{case}.npz", allow_pickle=False) as tables:
        positions = tables["positions"].astype(np.int64)
        gpu = np.concatenate([tables["cuda_cos"], tables["cuda_sin"]], 1).astype(np.float64)
    exact = paths.exact(key, positions)
    bound, _ = envelope.bounds(key, positions)
    ratio = np.abs(gpu - exact) / np.concatenate([bound, bound], 1)
    assert ratio.max() <= MARGINS[case]
    assert ratio.max() > MARGINS[case] - 0.02  # the margin the docs give is the measured one


def test_position_casts() -> None:
    positions = np.array([256, 257, 258, 2049, 65504, 65520, 1 << 24, (1 << 24) + 1])
    bf16 = paths.cast(positions, "bfloat16")
    assert bf16.tolist()[:3] == [256, 256, 258]  # ties to even
    fp16 = paths.cast(positions, "float16")
    assert fp16[3] == 2048
    assert fp16[4] == 65504
    assert np.isinf(fp16[5])  # past float16's largest: infinite
    assert paths.cast(positions, "float32")[-1] == 1 << 24


# diffusers' timestep embeddings on the GPU: dim, flip_sin_to_cos, downscale_freq_shift, and
# the envelope's margin over them, measured (integer timesteps 0 .. 999)
TIMESTEPS: Final = {
    "t320_flip1_shift0": (320, True, 0.0, 0.91),
    "t256_flip0_shift1": (256, False, 1.0, 0.50),
}


@pytest.mark.parametrize("case", list(TIMESTEPS))
def test_every_gpu_timestep_entry_is_inside_the_device_envelope(case: str) -> None:
    dim, flip, shift, margin = TIMESTEPS[case]
    key = TimestepKey(dim, flip_sin_to_cos=flip, downscale_freq_shift=shift)
    with np.load(CUDA / "diffusers.npz", allow_pickle=False) as tables:
        assert tables["timesteps"][:1000].tolist() == list(range(1000))
        gpu, cpu = tables[f"cuda_{case}"][:1000], tables[f"cpu_{case}"][:1000]
    positions = np.arange(1000, dtype=np.int64)
    assert (gpu != cpu).mean() > 0.35  # CUDA's expf and the CPU's round otherwise
    exact = paths.exact(key, positions)
    bound, _ = envelope.bounds(key, positions)
    ratio = np.abs(timestep.entries(key, gpu.astype(np.float64)) - exact) / np.tile(bound, 2)
    assert ratio.max() <= margin
    assert ratio.max() > margin - 0.02


def test_flux_s_rope_is_the_gpus_and_inside_the_device_envelope() -> None:
    """diffusers' FluxPosEmbed in float64 (512 text tokens, a 32 x 32 grid): the GPU's table
    is the CPU's, which is the service's library table bit for bit; the float64 envelope
    holds it, its float32 rounding nearly all of it."""
    key = rope_nd.preset_key(
        "flux", (32, 32), {"text_tokens": 512}, None, "interleaved", "library", "float32"
    )
    rows = np.arange(key.tokens, dtype=np.int64)
    with np.load(CUDA / "diffusers.npz", allow_pickle=False) as tables:
        assert np.array_equal(rope_nd.ids(key, rows).T, tables["flux_ids"])
        cpu = np.concatenate([tables["cpu_flux_cos"], tables["cpu_flux_sin"]], 1)
        gpu = np.concatenate([tables["cuda_flux_cos"], tables["cuda_flux_sin"]], 1)
    assert np.array_equal(gpu, cpu)
    assert np.array_equal(rope_nd.take(key, rows), cpu)
    bound, _ = envelope.bounds(key, rows)
    ratio = np.abs(rope_nd.entries(key, gpu) - paths.exact(key, rows)) / np.tile(bound, 2)
    assert 0.99 < ratio.max() <= 1.0
