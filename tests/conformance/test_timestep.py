"""Conformance: diffusion timestep embeddings against the real code (no weights):

- diffusers 0.42.1's ``get_timestep_embedding`` and its ``Timesteps`` module
  (``models/embeddings.py``) for the presets that call them (``diffusers``, ``unet``,
  ``ddpm``, ``guided-diffusion``, which DiT's and guided-diffusion's ``timestep_embedding``
  equal, ``qwen-image``), at widths 320, 256, 255 and 1, integer timesteps 0..999 (σ in
  [0, 1] for Qwen-Image), through ``GET`` and ``POST .../positions``;
- FLUX.1's reference sampler (black-forest-labs/flux 802fb47, ``sampling.py::denoise``'s
  ``torch.full(..., t_curr, dtype=bfloat16)`` and ``modules/layers.py::timestep_embedding``,
  transcribed below) and diffusers' ``FluxPipeline`` (``t.expand().to(bfloat16)``, ``/ 1000``,
  the transformer's ``.to(bfloat16) * 1000``, ``Timesteps(256, True, 0)``) at 2,000 σ;
- Wan2.1's ``sinusoidal_embedding_1d`` (Wan-Video/Wan2.1 9737cba, ``wan/modules/model.py``,
  transcribed below) in float64, then ``.float()``;
- ``POST .../from-config`` of each diffusers class it reads, against the ``Timesteps``
  modules of the class built from the same (tiny) config with ``from_config`` (random
  weights, nothing downloaded): their width, flip, shift and scale, and their embedding of
  timesteps 0..999.

``rounding=library`` follows the code operation by operation with the library engine's exp,
sin and cos (``service.encodings.kernels``): with the torch engine, the service's engine
where torch imports, every float32 table is the library's bit for bit (asserted); with the
numpy engine (correctly rounded functions) the share of entries that are bit for bit, and
the largest difference in float32 ulps of the reference entry, are measured and written to
``artifacts/conformance-timestep.json``. ``rounding=exact`` is
within half a float32 ulp (float64: 2^-51) of 50-digit arithmetic (mpmath)."""

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

from service.encodings import _library, kernels, timestep
from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "diffusers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

TABLE: Final = "/v1/encodings/timestep"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-timestep.json"
FIGURES: Final[dict[str, dict[str, Any]]] = {}
# (preset, dim): the diffusers presets' common widths, an odd one, the narrowest
CALLED: Final = [
    (preset, dim)
    for preset in ("diffusers", "unet", "guided-diffusion", "ddpm")
    for dim in (320, 256, 255, 1)
]


@functools.cache
def lib(name: str) -> Any:
    return importlib.import_module(name)


@pytest.fixture(scope="module", autouse=True)
def figures() -> Iterator[None]:
    """The measured figures, written once the module's tests have run."""
    yield
    if FIGURES:
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(json.dumps(FIGURES, indent=1, sort_keys=True) + "\n")
        print("\n\nConformance, timestep embeddings:\n" + json.dumps(FIGURES, indent=1))


def served(service: httpx.Client, query: str) -> NDArray[np.floating]:
    answer = service.get(f"{TABLE}?{query}&format=npy")
    assert answer.status_code == 200, answer.text
    found: NDArray[np.floating] = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found


def at(service: httpx.Client, query: str, timesteps: NDArray[np.float64]) -> NDArray[Any]:
    answer = service.post(
        f"{TABLE}/positions?max_len=1&{query}&format=npy",
        json={"position_ids": timesteps.tolist()},
    )
    assert answer.status_code == 200, answer.text
    found: NDArray[Any] = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found


def ulps(a: NDArray[np.float32], b: NDArray[np.float32]) -> NDArray[np.float64]:
    """|a - b| in float32 ulps of ``b`` (of the smallest normal at zero)."""
    unit = np.spacing(np.maximum(np.abs(b), np.finfo(np.float32).tiny))
    return np.abs(a.astype(np.float64) - b.astype(np.float64)) / unit.astype(np.float64)


def measure(
    name: str,
    ours: NDArray[np.float32],
    reference: NDArray[np.float32],
    scale: float = 1.0,
    bitwise: bool = True,
) -> None:
    """The share of entries bit for bit and the largest difference, recorded under
    ``name``; every entry bit for bit with the torch engine where ``bitwise``, else within
    the float32 functions' error, carried by the angle (up to 1000 times ``scale``
    radians)."""
    assert ours.shape == reference.shape
    assert ours.dtype == reference.dtype == np.float32
    apart = ulps(ours, reference)
    difference = np.abs(ours.astype(np.float64) - reference)
    FIGURES[name] = {
        "entries": int(ours.size),
        "bit_for_bit": float((ours == reference).mean()) if ours.size else 1.0,
        "largest_ulps": float(apart.max(initial=0.0)),
        "largest_ulps_of_1": float(difference.max(initial=0.0) / 2.0**-24),
        "largest_difference": float(difference.max(initial=0.0)),
    }
    # a frequency one ulp apart moves an angle of t (at most 1000) by 1000 * 2^-24
    assert difference.max(initial=0.0) <= 1e-4 * scale
    if bitwise and kernels.engine() == "torch":
        np.testing.assert_array_equal(ours, reference)


def timesteps_of(preset: str) -> NDArray[np.float64]:
    return np.arange(1000, dtype=np.float64)


def diffusers_embedding(key: timestep.TimestepKey, t: NDArray[np.float64]) -> NDArray[np.float32]:
    """``get_timestep_embedding`` with the key's parameters at float32 timesteps."""
    torch = lib("torch")
    embeddings = lib("diffusers.models.embeddings")
    found: NDArray[np.float32] = embeddings.get_timestep_embedding(
        torch.tensor(t, dtype=torch.float32),
        key.dim,
        flip_sin_to_cos=key.flip_sin_to_cos,
        downscale_freq_shift=key.downscale_freq_shift,
        scale=key.scale,
        max_period=int(key.max_period),
    ).numpy()
    return found


@pytest.mark.parametrize(("preset", "dim"), CALLED)
def test_library_is_diffusers_function_and_module(
    service: httpx.Client, preset: str, dim: int
) -> None:
    torch = lib("torch")
    embeddings = lib("diffusers.models.embeddings")
    key = timestep.preset_key(dim, preset, {}, "library", "float32")
    t = timesteps_of(preset)
    reference = diffusers_embedding(key, t)
    module = embeddings.Timesteps(
        dim, key.flip_sin_to_cos, key.downscale_freq_shift, scale=key.scale
    )
    with torch.no_grad():
        np.testing.assert_array_equal(
            module(torch.tensor(t, dtype=torch.float32)).numpy(), reference
        )
    ours = served(service, f"max_len=1000&dim={dim}&preset={preset}")
    measure(f"{preset}/{dim}", ours, reference)
    # where the entries part: torch's exp one ulp off moves every angle of its frequency
    half = dim // 2
    exponent = np.float32(-math.log(key.max_period)) * np.arange(half, dtype=np.float32)
    exponent = exponent / np.float32(half - key.downscale_freq_shift)
    theirs = torch.exp(torch.from_numpy(exponent)).numpy()
    FIGURES[f"{preset}/{dim}"]["frequencies_apart"] = int(
        (theirs != _library.exp32(exponent)).sum()
    )
    FIGURES[f"{preset}/{dim}"]["frequencies"] = half


@pytest.mark.parametrize(("preset", "dim"), CALLED)
@pytest.mark.usefixtures("numpy_engine")
def test_library_without_torch_is_within_an_ulp(preset: str, dim: int) -> None:
    """The numpy engine: correctly rounded exp, sin and cos in diffusers' order, each entry
    within the float32 functions' error of torch's; the share that differs is measured."""
    key = timestep.preset_key(dim, preset, {}, "library", "float32")
    t = timesteps_of(preset)
    reference = diffusers_embedding(key, t)
    ours = timestep.at(key, t)
    measure(f"numpy engine {preset}/{dim}", ours, reference, bitwise=False)


def sampler_sigmas() -> NDArray[np.float64]:
    return np.arange(1, 2001, dtype=np.float64) / 2000


def flux_reference(sigmas: NDArray[np.float64]) -> tuple[Any, Any]:
    """The reference sampler's timesteps (bf16 σ, ``1000 * t`` in bf16) and embeddings."""
    torch = lib("torch")
    # sampling.py::denoise: t_vec = torch.full((img.shape[0],), t_curr, dtype=img.dtype)
    t = torch.stack([torch.full((1,), float(s), dtype=torch.bfloat16)[0] for s in sigmas])
    return t * 1000.0, bfl_timestep_embedding(t, 256)


def bfl_timestep_embedding(
    t: Any, dim: int, max_period: int = 10000, time_factor: float = 1000.0
) -> Any:
    """black-forest-labs/flux 802fb47, ``src/flux/modules/layers.py``, as written."""
    torch = lib("torch")
    t = time_factor * t
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half
    ).to(t.device)
    args = t[:, None].float() * freqs[None]
    embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    if torch.is_floating_point(t):
        embedding = embedding.to(t)
    return embedding


def test_flux_sampler_s_timesteps_and_embeddings(service: httpx.Client) -> None:
    sigmas = sampler_sigmas()
    received, embedding = flux_reference(sigmas)
    key = timestep.preset_key(256, "flux", {}, "library", "float32")
    # rows are the scheduler's timesteps, σ·1000: the sampler's σ is t / 1000
    np.testing.assert_array_equal(timestep.received(key, sigmas * 1000), received.float().numpy())
    ours = at(service, "dim=256&preset=flux", sigmas * 1000)
    # the reference returns bfloat16 (embedding.to(t)): ours rounded so, equal where the
    # float32 functions agree
    narrowed = timestep.narrowed(ours, "bfloat16")
    share = float((narrowed == embedding.float().numpy()).mean())
    FIGURES["flux/256 (bfloat16 answer)"] = {"entries": int(ours.size), "bit_for_bit": share}
    assert share > 0.99
    measure(
        "flux/256",
        ours,
        diffusers_embedding(timestep.TimestepKey(256, True, 0.0), received.float().numpy()),
    )


def test_flux_diffusers_pipeline_s_three_roundings(service: httpx.Client) -> None:
    torch = lib("torch")
    embeddings = lib("diffusers.models.embeddings")
    sigmas = sampler_sigmas()
    t = torch.tensor(sigmas * 1000, dtype=torch.float32)  # the scheduler's timesteps
    received = flux_pipeline(t)
    key = timestep.preset_key(256, "flux-diffusers", {}, "library", "float32")
    np.testing.assert_array_equal(
        timestep.received(key, t.double().numpy()), received.float().numpy()
    )
    with torch.no_grad():
        reference = embeddings.Timesteps(256, True, 0)(received).numpy()
    measure(
        "flux-diffusers/256", at(service, "dim=256&preset=flux-diffusers", sigmas * 1000), reference
    )
    sampler, _ = flux_reference(sigmas)
    FIGURES["flux against flux-diffusers"] = {
        "sigmas": len(sigmas),
        "timesteps_apart": int((sampler != received).sum()),
        "largest_apart": float((sampler.float() - received.float()).abs().max()),
    }


def qwen_image_pipeline(t: Any) -> Any:
    """pipeline_qwenimage.py: ``t.expand(...).to(latents.dtype)``, then ``timestep / 1000``
    (bfloat16), ``timestep.to(hidden_states.dtype)`` in the transformer."""
    torch = lib("torch")
    return (t.to(torch.bfloat16) / 1000).to(torch.bfloat16)


def auraflow_pipeline(t: Any) -> Any:
    """pipeline_aura_flow.py: ``torch.tensor([t / 1000])`` (float32), then
    ``.to(latents.dtype)``."""
    torch = lib("torch")
    return (t / 1000).to(torch.bfloat16)


def flux_pipeline(t: Any) -> Any:
    """pipeline_flux.py's ``.to(bfloat16)`` and ``/ 1000``; transformer_flux.py's ``* 1000``."""
    torch = lib("torch")
    return (t.to(torch.bfloat16) / 1000).to(torch.bfloat16) * 1000


# the pipelines that change the scheduler's timesteps before the transformer's embedding
PIPELINES: Final = {
    "flux-diffusers": flux_pipeline,
    "qwen-image": qwen_image_pipeline,
    "auraflow": auraflow_pipeline,
}


@pytest.mark.parametrize(
    ("preset", "module"),
    [
        pytest.param(
            "qwen-image", "transformer_qwenimage.QwenTimestepProjEmbeddings", id="qwen-image"
        ),
        pytest.param(
            "auraflow", "auraflow_transformer_2d.AuraFlowTransformer2DModel", id="auraflow"
        ),
    ],
)
def test_pipelines_that_pass_t_over_1000(service: httpx.Client, preset: str, module: str) -> None:
    """Qwen-Image divides t by 1000 in bfloat16, AuraFlow in float32 before casting; both
    embed σ with Timesteps(256, True, 0, scale=1000)."""
    torch = lib("torch")
    embeddings = lib("diffusers.models.embeddings")
    t = torch.arange(1000, dtype=torch.float32)
    passed = PIPELINES[preset](t)
    key = timestep.preset_key(256, preset, {}, "library", "float32")
    np.testing.assert_array_equal(
        timestep.received(key, t.double().numpy()), passed.float().numpy()
    )
    file, name = module.split(".")
    found = vars(lib(f"diffusers.models.transformers.{file}"))[name]
    assert found is not None
    with torch.no_grad():
        reference = embeddings.Timesteps(256, True, 0, scale=1000)(passed).numpy()
    measure(
        f"{preset}/256",
        served(service, f"max_len=1000&dim=256&preset={preset}"),
        reference,
        scale=1000,
    )
    others = {"qwen-image": "auraflow", "auraflow": "qwen-image"}
    FIGURES[f"{preset}/256"]["timesteps_apart_from_" + others[preset]] = int(
        (passed != PIPELINES[others[preset]](t)).sum()
    )


def wan_embedding(dim: int, position: Any) -> Any:
    """Wan-Video/Wan2.1 9737cba, ``wan/modules/model.py::sinusoidal_embedding_1d``."""
    torch = lib("torch")
    assert dim % 2 == 0
    half = dim // 2
    position = position.type(torch.float64)
    sinusoid = torch.outer(position, torch.pow(10000, -torch.arange(half).to(position).div(half)))
    return torch.cat([torch.cos(sinusoid), torch.sin(sinusoid)], dim=1)


@pytest.mark.parametrize("dim", [256, 2])
def test_wan_float64(service: httpx.Client, dim: int) -> None:
    torch = lib("torch")
    t = torch.arange(1000, dtype=torch.float32)
    reference = wan_embedding(dim, t)
    wide = served(service, f"max_len=1000&dim={dim}&preset=wan&dtype=float64")
    np.testing.assert_allclose(wide, reference.numpy(), rtol=0, atol=2.0**-50)
    FIGURES[f"wan/{dim} float64"] = {
        "entries": int(wide.size),
        "bit_for_bit": float((wide == reference.numpy()).mean()),
    }
    measure(
        f"wan/{dim}",
        served(service, f"max_len=1000&dim={dim}&preset=wan"),
        reference.float().numpy(),
    )


def oracle(key: timestep.TimestepKey, t: float) -> list[Any]:
    """A row to 50 digits at the received timestep ``t``."""
    mpmath = lib("mpmath")
    with mpmath.workdps(50):
        half = key.dim // 2
        exponent = [
            -mpmath.log(key.max_period) * i / (half - mpmath.mpf(key.downscale_freq_shift))
            for i in range(half)
        ]
        angles = [mpmath.mpf(key.scale) * mpmath.mpf(t) * mpmath.exp(e) for e in exponent]
        sines, cosines = [mpmath.sin(a) for a in angles], [mpmath.cos(a) for a in angles]
    row = cosines + sines if key.flip_sin_to_cos else sines + cosines
    return row + [mpmath.mpf(0)] * (key.dim % 2)


@pytest.mark.parametrize(
    "preset", ["diffusers", "unet", "ddpm", "flux", "flux-diffusers", "wan", "qwen-image"]
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exact_is_50_digit_arithmetic_rounded(
    service: httpx.Client, preset: str, dtype: str
) -> None:
    mpmath = lib("mpmath")
    key = timestep.preset_key(64, preset, {}, "exact", "float64")
    given = np.array([0.0, 1.0, 0.5, 0.75, 0.9, 1 / 3, 17.0, 500.0, 750.0, 999.0, 12345.0])
    ours = at(service, f"dim=64&preset={preset}&rounding=exact&dtype={dtype}", given)
    largest = 0.0
    for t, row in zip(timestep.received(key, given), ours, strict=True):
        for value, true in zip(row, oracle(key, float(t)), strict=True):
            if dtype == "float32":
                bound = float(np.spacing(np.float32(abs(value)))) / 2
            else:
                bound = 2.0**-51
            error = abs(mpmath.mpf(float(value)) - true)
            assert error <= bound, (preset, t, value, true)
            largest = max(largest, float(error / bound) if bound else 0.0)
    FIGURES[f"exact {preset} {dtype}"] = {"largest_error_over_bound": largest}


# each class's config, as small as its constructor allows
TINY: Final[dict[str, dict[str, Any]]] = {
    "UNet2DModel": {
        "block_out_channels": [32, 64],
        "down_block_types": ["DownBlock2D", "DownBlock2D"],
        "up_block_types": ["UpBlock2D", "UpBlock2D"],
        "norm_num_groups": 8,
        "layers_per_block": 1,
        "flip_sin_to_cos": False,
        "freq_shift": 1,
    },
    "UNet2DConditionModel": {
        "block_out_channels": [32, 64],
        "down_block_types": ["DownBlock2D", "DownBlock2D"],
        "up_block_types": ["UpBlock2D", "UpBlock2D"],
        "norm_num_groups": 8,
        "layers_per_block": 1,
        "cross_attention_dim": 32,
    },
    "FluxTransformer2DModel": {
        "num_layers": 1,
        "num_single_layers": 1,
        "attention_head_dim": 16,
        "num_attention_heads": 2,
        "joint_attention_dim": 32,
        "pooled_projection_dim": 32,
        "in_channels": 4,
        "axes_dims_rope": [4, 6, 6],
    },
    "SD3Transformer2DModel": {
        "sample_size": 32,
        "patch_size": 2,
        "in_channels": 4,
        "num_layers": 1,
        "attention_head_dim": 8,
        "num_attention_heads": 2,
        "joint_attention_dim": 32,
        "caption_projection_dim": 16,
        "pooled_projection_dim": 32,
        "out_channels": 4,
        "pos_embed_max_size": 32,
    },
    "WanTransformer3DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 8,
        "in_channels": 4,
        "out_channels": 4,
        "text_dim": 16,
        "freq_dim": 32,
        "ffn_dim": 32,
        "num_layers": 1,
    },
    "CogVideoXTransformer3DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 8,
        "in_channels": 4,
        "num_layers": 1,
        "text_embed_dim": 16,
        "time_embed_dim": 8,
        "sample_width": 8,
        "sample_height": 8,
        "sample_frames": 5,
    },
    "QwenImageTransformer2DModel": {
        "num_layers": 1,
        "attention_head_dim": 8,
        "num_attention_heads": 2,
        "joint_attention_dim": 16,
        "in_channels": 4,
        "axes_dims_rope": [2, 2, 4],
    },
    "PixArtTransformer2DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 8,
        "in_channels": 4,
        "num_layers": 1,
        "sample_size": 8,
        "patch_size": 2,
        "cross_attention_dim": 16,
        "caption_channels": 16,
        "norm_type": "ada_norm_single",
        "norm_num_groups": 8,
    },
    "HunyuanVideoTransformer3DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 8,
        "in_channels": 4,
        "out_channels": 4,
        "num_layers": 1,
        "num_single_layers": 1,
        "num_refiner_layers": 1,
        "text_embed_dim": 16,
        "pooled_projection_dim": 16,
        "rope_axes_dim": [2, 2, 4],
    },
    "AuraFlowTransformer2DModel": {
        "sample_size": 8,
        "patch_size": 2,
        "in_channels": 4,
        "num_mmdit_layers": 1,
        "num_single_dit_layers": 1,
        "attention_head_dim": 8,
        "num_attention_heads": 2,
        "joint_attention_dim": 16,
        "caption_projection_dim": 16,
        "out_channels": 4,
        "pos_embed_max_size": 16,
    },
}


def test_every_class_read_is_built_here() -> None:
    from service.schemas.timestep import CLASSES

    assert set(CLASSES) == set(TINY)


@pytest.mark.parametrize("name", sorted(TINY))
def test_from_config_is_the_class_s_timesteps(service: httpx.Client, name: str) -> None:
    torch = lib("torch")
    diffusers = lib("diffusers")
    embeddings = lib("diffusers.models.embeddings")
    config = {"_class_name": name, **TINY[name]}
    model = getattr(diffusers, name).from_config(TINY[name])
    modules = [m for m in model.modules() if isinstance(m, embeddings.Timesteps)]
    assert modules
    answer = service.post(f"{TABLE}/from-config?max_len=1000&format=json", json=config)
    assert answer.status_code == 200, answer.text
    document = answer.json()
    for module in modules:
        assert (
            module.num_channels,
            module.flip_sin_to_cos,
            module.downscale_freq_shift,
            module.scale,
        ) == (
            document["dim"],
            document["flip_sin_to_cos"],
            document["downscale_freq_shift"],
            document["scale"],
        )
    t = torch.arange(1000, dtype=torch.float32)
    if document["preset"] in PIPELINES:  # the pipeline's roundings first
        t = PIPELINES[document["preset"]](t)
    with torch.no_grad():
        reference = modules[0](t).numpy()
    ours = np.array(document["data"], dtype=np.float32)
    measure(f"from-config {name}", ours, reference, scale=document["scale"])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("factor", [1.0, 1000.0, 0.001])
def test_timesteps_are_cast_and_multiplied_as_torch_does(dtype: str, factor: float) -> None:
    """float64 timesteps cast to the dtype (torch goes through float32: a double just past
    a tie of the narrow type rounds as the float32 tie does), then times the factor in it."""
    torch = lib("torch")
    largest = 60 if dtype == "float16" and factor > 1 else 2000
    given = np.random.default_rng(0).uniform(0, largest, 10_000)
    ties = [1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-11 + 2.0**-40, 750.0, 0.9, 999.5]
    given = np.concatenate([given, ties])
    if dtype == "float16":
        given = given[given * factor < 65000]  # float16 ends at 65504
    narrow = torch.tensor(given, dtype=torch.float64).to(getattr(torch, dtype))
    expected = (factor * narrow).float().numpy()  # sampling.py's time_factor * t
    key = timestep.TimestepKey(4, time_factor=factor, timestep_dtype=dtype)  # type: ignore[arg-type]
    np.testing.assert_array_equal(timestep.received(key, given), expected)


def test_answers_name_the_torch_engine(service: httpx.Client) -> None:
    """The conformance environment's service computes with torch, and says so."""
    torch = lib("torch")
    answer = service.get(f"{TABLE}?max_len=4&dim=8&format=npy")
    capability = torch.backends.cpu.get_cpu_capability()
    assert answer.headers["x-library-engine"] == f"torch {torch.__version__} {capability}"
    exact = service.get(f"{TABLE}?max_len=4&dim=8&format=npy&rounding=exact")
    assert "x-library-engine" not in exact.headers
