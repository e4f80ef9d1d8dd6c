"""Conformance: multi-axis RoPE against the real code (no weights):

- diffusers 0.42.1's modules (``FluxPosEmbed``, ``Flux2PosEmbed``,
  ``HunyuanVideoRotaryPosEmbed``, ``WanRotaryPosEmbed``) with the ids their pipelines build
  (``FluxPipeline._prepare_latent_image_ids`` in float32 and in bfloat16, text ids of zeros;
  ``Flux2Pipeline._prepare_text_ids`` and ``_prepare_latent_ids``; text first), and
  ``get_1d_rotary_pos_embed`` per axis for preset ``diffusers``;
- black-forest-labs/flux's ``rope`` and ``EmbedND`` (``src/flux/math.py``,
  ``src/flux/modules/layers.py``), transcribed below at 1f71c43 (2024: float64 frequencies)
  and 802fb47 (since 4343061, 2025-01-31: frequencies in the ids' dtype, float32);
- Wan2.1's ``rope_params`` (Wan-Video/Wan2.1 9737cba, ``wan/modules/model.py``, transcribed
  below) in float64 and its ``rope_apply``'s split;
- diffusers' ``apply_rotary_emb`` (float32) and Wan2.1's ``rope_apply`` (float64) against
  ``POST .../apply``.

The float64 presets are rounded once from float64 and are expected bit for bit; the float32
ones follow torch operation by operation with the library engine's pow, cos and sin: with
the torch engine (this session's) they are bit for bit (asserted), with the numpy engine
(correctly rounded) within an ulp of a frequency (measured); as served, the share of
entries bit for bit and the largest difference are written to
``artifacts/conformance-rope-nd.json``."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import json
import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, Final

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray

from service.encodings import kernels, rope_nd
from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "diffusers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

TABLE: Final = "/v1/encodings/rope-nd"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-rope-nd.json"
FIGURES: Final[dict[str, dict[str, Any]]] = {}


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
        print("\n\nConformance, multi-axis RoPE:\n" + json.dumps(FIGURES, indent=1))


def served(service: httpx.Client, query: str) -> tuple[NDArray[Any], NDArray[Any]]:
    answer = service.get(f"{TABLE}?{query}&format=npz")
    assert answer.status_code == 200, answer.text
    found = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found["cos"], found["sin"]


def measure(name: str, ours: tuple[Any, ...], reference: tuple[Any, ...], bitwise: bool) -> None:
    """The share of entries bit for bit and the largest difference, recorded under ``name``;
    ``bitwise``: every entry the same."""
    got = np.concatenate([np.asarray(part) for part in ours])
    want = np.concatenate([np.asarray(part.numpy()) for part in reference])
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    difference = np.abs(got.astype(np.float64) - want)
    FIGURES[name] = {
        "entries": int(got.size),
        "bit_for_bit": float((got == want).mean()),
        "largest_difference": float(difference.max(initial=0.0)),
    }
    if bitwise or kernels.engine() == "torch":  # the torch engine: torch's own functions
        np.testing.assert_array_equal(got, want)
    assert difference.max(initial=0.0) <= 2e-4  # angles up to ~200 rad, an ulp of a frequency


def torch_functions(monkeypatch: pytest.MonkeyPatch, trigonometry: bool = True) -> None:
    """The library path's pow, sin and cos are torch's own: the torch library engine's
    (``service.encodings.kernels``; ``torch.polar``'s cos and sin for Qwen-Image), which
    the conformance session runs."""
    assert kernels.engine() == "torch"


def flux_ids(text: int, height: int, width: int, dtype: Any) -> Any:
    """diffusers' FLUX pipeline's ids: text zeros, then the latent grid, in ``dtype``."""
    torch = lib("torch")
    pipeline = lib("diffusers.pipelines.flux.pipeline_flux").FluxPipeline
    image = pipeline._prepare_latent_image_ids(1, height, width, "cpu", dtype)
    return torch.cat([torch.zeros(text, 3, dtype=dtype), image])


@pytest.mark.parametrize(
    ("ids_dtype", "height", "width"), [("float32", 32, 48), ("bfloat16", 300, 4)]
)
def test_flux_pos_embed(service: httpx.Client, ids_dtype: str, height: int, width: int) -> None:
    torch = lib("torch")
    module = lib("diffusers.models.transformers.transformer_flux").FluxPosEmbed(10000, [16, 56, 56])
    reference = module(flux_ids(7, height, width, getattr(torch, ids_dtype)))
    ours = served(service, f"grid={height},{width}&preset=flux&text_tokens=7&ids_dtype={ids_dtype}")
    measure(f"flux ({ids_dtype} ids) vs FluxPosEmbed", ours, reference, bitwise=True)


def bfl_rope(pos: Any, dim: int, theta: int, float64: bool) -> Any:
    """black-forest-labs/flux ``src/flux/math.py::rope``: 1f71c43 (``float64``) and
    802fb47 (frequencies in ``pos.dtype``), as written there."""
    torch = lib("torch")
    dtype = torch.float64 if float64 else pos.dtype
    scale = torch.arange(0, dim, 2, dtype=dtype, device=pos.device) / dim
    omega = 1.0 / (theta**scale)
    out = torch.einsum("...n,d->...nd", pos.to(omega.dtype) if float64 else pos, omega)
    out = torch.stack([torch.cos(out), -torch.sin(out), torch.sin(out), torch.cos(out)], dim=-1)
    out = out.reshape(*out.shape[:-1], 2, 2)
    return out.float()


def bfl_embed(ids: Any, float64: bool) -> tuple[Any, Any]:
    """``EmbedND`` (``modules/layers.py``) as cos and sin of each pair, each twice."""
    torch = lib("torch")
    out = torch.cat(
        [bfl_rope(ids[..., i], d, 10000, float64) for i, d in enumerate((16, 56, 56))], dim=-3
    )[0]
    return (
        out[..., 0, 0].repeat_interleave(2, dim=-1),
        out[..., 1, 0].repeat_interleave(2, dim=-1),
    )


def bfl_ids(text: int, height: int, width: int) -> Any:
    """``sampling.py::prepare``: ``torch.zeros(h // 2, w // 2, 3)`` filled, text zeros."""
    torch = lib("torch")
    image = torch.zeros(height, width, 3)
    image[..., 1] = image[..., 1] + torch.arange(height)[:, None]
    image[..., 2] = image[..., 2] + torch.arange(width)[None, :]
    return torch.cat([torch.zeros(text, 3), image.reshape(-1, 3)])[None]


@pytest.mark.parametrize(("preset", "float64"), [("flux", True), ("flux-bfl", False)])
def test_flux_reference(service: httpx.Client, preset: str, float64: bool) -> None:
    reference = bfl_embed(bfl_ids(5, 40, 24), float64)
    ours = served(service, f"grid=40,24&preset={preset}&text_tokens=5")
    measure(f"{preset} vs black-forest-labs/flux rope", ours, reference, bitwise=float64)


def test_flux_bfl_with_torch_s_functions_is_bit_for_bit(
    service: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch_functions(monkeypatch)
    reference = bfl_embed(bfl_ids(3, 20, 30), False)
    ours = served(service, "grid=20,30&preset=flux-bfl&text_tokens=3&stop=603")
    measure("flux-bfl with torch's pow, sin, cos", ours, reference, bitwise=True)


def test_flux2_pos_embed(service: httpx.Client) -> None:
    torch = lib("torch")
    pipeline = lib("diffusers.pipelines.flux2.pipeline_flux2").Flux2Pipeline
    module = lib("diffusers.models.transformers.transformer_flux2").Flux2PosEmbed(2000, [32] * 4)
    text = pipeline._prepare_text_ids(torch.zeros(1, 9, 4))[0]
    image = pipeline._prepare_latent_ids(torch.zeros(1, 4, 24, 40))[0]
    cos = torch.cat([module(text)[0], module(image)[0]])
    sin = torch.cat([module(text)[1], module(image)[1]])
    ours = served(service, "grid=24,40&preset=flux2&text_tokens=9")
    measure("flux2 vs Flux2PosEmbed", ours, (cos, sin), bitwise=True)


def test_hunyuan_video(service: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = lib("torch")
    module = lib("diffusers.models.transformers.transformer_hunyuan_video")
    rope = module.HunyuanVideoRotaryPosEmbed(2, 1, [16, 56, 56], 256.0)
    reference = rope(torch.zeros(1, 1, 5, 2 * 30, 2 * 36))
    ours = served(service, "grid=5,30,36&preset=hunyuan-video")
    measure("hunyuan-video vs HunyuanVideoRotaryPosEmbed", ours, reference, bitwise=False)
    torch_functions(monkeypatch)  # a table not yet in the cache
    reference = rope(torch.zeros(1, 1, 4, 2 * 30, 2 * 36))
    ours = served(service, "grid=4,30,36&preset=hunyuan-video")
    measure("hunyuan-video with torch's pow, sin, cos", ours, reference, bitwise=True)


def wan_rope_params(max_seq_len: int, dim: int, theta: float = 10000) -> Any:
    """Wan-Video/Wan2.1 9737cba ``wan/modules/model.py::rope_params``."""
    torch = lib("torch")
    freqs = torch.outer(
        torch.arange(max_seq_len),
        1.0 / torch.pow(theta, torch.arange(0, dim, 2).to(torch.float64).div(dim)),
    )
    return torch.polar(torch.ones_like(freqs), freqs)


def test_wan(service: httpx.Client) -> None:
    torch = lib("torch")
    module = lib("diffusers.models.transformers.transformer_wan")
    rope = module.WanRotaryPosEmbed(128, (1, 2, 2), 1024)
    cos, sin = rope(torch.zeros(1, 1, 6, 2 * 20, 2 * 32))
    ours = served(service, "grid=6,20,32&preset=wan")
    measure("wan vs WanRotaryPosEmbed", ours, (cos[0, :, 0], sin[0, :, 0]), bitwise=True)
    d = 128
    freqs = torch.cat(
        [wan_rope_params(1024, d - 4 * (d // 6)), *[wan_rope_params(1024, 2 * (d // 6))] * 2],
        dim=1,
    )
    c = d // 2
    parts = freqs.split([c - 2 * (c // 3), c // 3, c // 3], dim=1)
    f, h, w = 6, 20, 32
    grid = torch.cat(
        [
            parts[0][:f].view(f, 1, 1, -1).expand(f, h, w, -1),
            parts[1][:h].view(1, h, 1, -1).expand(f, h, w, -1),
            parts[2][:w].view(1, 1, w, -1).expand(f, h, w, -1),
        ],
        dim=-1,
    ).reshape(f * h * w, -1)
    reference = (
        grid.real.repeat_interleave(2, dim=-1),
        grid.imag.repeat_interleave(2, dim=-1),
    )
    narrowed = (reference[0].float(), reference[1].float())
    measure("wan vs Wan2.1 rope_params", ours, narrowed, bitwise=True)
    wide = served(service, "grid=6,20,32&preset=wan&dtype=float64")
    measure("wan (float64) vs Wan2.1 rope_params", wide, reference, bitwise=False)


def test_diffusers_function_per_axis(
    service: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = lib("torch")
    function = lib("diffusers.models.embeddings").get_1d_rotary_pos_embed
    grid = torch.stack(
        torch.meshgrid(torch.arange(3.0), torch.arange(7.0), torch.arange(9.0), indexing="ij")
    )
    pos = grid.reshape(3, -1)
    parts = [function(d, pos[i], 500.0, use_real=True) for i, d in enumerate((8, 24, 32))]
    reference = (torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 1))
    query = "grid=3,7,9&axes_dim=8,24,32&theta=500"
    measure(
        "diffusers vs get_1d_rotary_pos_embed", served(service, query), reference, bitwise=False
    )
    torch_functions(monkeypatch)  # the same table, not from the cache
    measure(
        "diffusers with torch's pow, sin, cos",
        served(service, query + "&dtype=float64"),
        (reference[0].double(), reference[1].double()),
        bitwise=True,
    )


def applied(service: httpx.Client, query: str, x: NDArray[np.float32]) -> NDArray[Any]:
    buffer = io.BytesIO()
    np.save(buffer, x)
    answer = service.post(
        f"{TABLE}/apply?{query}&format=npy",
        content=buffer.getvalue(),
        headers={"content-type": "application/x-npy"},
    )
    assert answer.status_code == 200, answer.text
    found: NDArray[Any] = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found


def test_apply_is_diffusers_apply_rotary_emb(service: httpx.Client) -> None:
    torch = lib("torch")
    module = lib("diffusers.models.transformers.transformer_flux").FluxPosEmbed(10000, [16, 56, 56])
    x = np.random.default_rng(3).standard_normal((1, 3, 4 + 12 * 10, 128)).astype(np.float32)
    rotary = module(flux_ids(4, 12, 10, torch.float32))
    apply_rotary_emb = lib("diffusers.models.embeddings").apply_rotary_emb
    reference = apply_rotary_emb(torch.from_numpy(x), rotary, sequence_dim=2)
    ours = applied(service, "grid=12,10&preset=flux&text_tokens=4", x)
    measure("apply (flux) vs apply_rotary_emb", (ours,), (reference,), bitwise=True)


def wan_rope_apply(x: Any, grid_sizes: Any, freqs: Any) -> Any:
    """Wan-Video/Wan2.1 9737cba ``wan/modules/model.py::rope_apply``: x (B, L, heads, D)."""
    torch = lib("torch")
    n, c = x.size(2), x.size(3) // 2
    freqs = freqs.split([c - 2 * (c // 3), c // 3, c // 3], dim=1)
    output = []
    for i, (f, h, w) in enumerate(grid_sizes.tolist()):
        seq_len = f * h * w
        x_i = torch.view_as_complex(x[i, :seq_len].to(torch.float64).reshape(seq_len, n, -1, 2))
        freqs_i = torch.cat(
            [
                freqs[0][:f].view(f, 1, 1, -1).expand(f, h, w, -1),
                freqs[1][:h].view(1, h, 1, -1).expand(f, h, w, -1),
                freqs[2][:w].view(1, 1, w, -1).expand(f, h, w, -1),
            ],
            dim=-1,
        ).reshape(seq_len, 1, -1)
        x_i = torch.view_as_real(x_i * freqs_i).flatten(2)
        x_i = torch.cat([x_i, x[i, seq_len:]])
        output.append(x_i)
    return torch.stack(output).float()


def test_apply_float64_is_wan_rope_apply(service: httpx.Client) -> None:
    torch = lib("torch")
    d = 128
    freqs = torch.cat(
        [wan_rope_params(1024, d - 4 * (d // 6)), *[wan_rope_params(1024, 2 * (d // 6))] * 2],
        dim=1,
    )
    x = np.random.default_rng(4).standard_normal((1, 2, 3 * 8 * 6, d)).astype(np.float32)
    upstream = torch.from_numpy(x).transpose(1, 2)  # Wan's (B, L, heads, D)
    reference = wan_rope_apply(upstream, torch.tensor([[3, 8, 6]]), freqs).transpose(1, 2)
    ours = applied(service, "grid=3,8,6&preset=wan&arithmetic=float64", x)
    measure(
        "apply (wan, float64) vs Wan2.1 rope_apply",
        (ours,),
        (reference.contiguous(),),
        bitwise=False,
    )


def qwen_freqs(height: int, width: int, text: int) -> Any:
    """diffusers' ``QwenEmbedRope`` (scale_rope, as ``QwenImageTransformer2DModel`` builds
    it) of a one-frame image: text first, as the joint attention concatenates them."""
    torch = lib("torch")
    module = lib("diffusers.models.transformers.transformer_qwenimage")
    rope = module.QwenEmbedRope(10000, [16, 56, 56], scale_rope=True)
    image, words = rope([(1, height, width)], device="cpu", max_txt_seq_len=text)
    return torch.cat([words, image])


def test_qwen_image(service: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    freqs = qwen_freqs(31, 22, 6)
    reference = (
        freqs.real.repeat_interleave(2, dim=-1).contiguous(),
        freqs.imag.repeat_interleave(2, dim=-1).contiguous(),
    )
    ours = served(service, "grid=31,22&preset=qwen-image&text_tokens=6")
    measure("qwen-image vs QwenEmbedRope", ours, reference, bitwise=False)
    torch_functions(monkeypatch, trigonometry=False)  # a table not yet in the cache
    freqs = qwen_freqs(30, 23, 5)
    reference = (
        freqs.real.repeat_interleave(2, dim=-1).contiguous(),
        freqs.imag.repeat_interleave(2, dim=-1).contiguous(),
    )
    ours = served(service, "grid=30,23&preset=qwen-image&text_tokens=5")
    measure("qwen-image with torch's pow", ours, reference, bitwise=False)


def test_apply_is_qwen_s_complex_product(service: httpx.Client) -> None:
    """``apply_rotary_emb_qwen(x, freqs, use_real=False)``: x (B, S, heads, D) as complex64
    times the frequencies; measured (torch's complex product may fuse)."""
    torch = lib("torch")
    module = lib("diffusers.models.transformers.transformer_qwenimage")
    freqs = qwen_freqs(8, 6, 3)
    x = np.random.default_rng(5).standard_normal((1, 2, 3 + 48, 128)).astype(np.float32)
    upstream = torch.from_numpy(x).transpose(1, 2)
    reference = module.apply_rotary_emb_qwen(upstream, freqs, use_real=False).transpose(1, 2)
    ours = applied(service, "grid=8,6&preset=qwen-image&text_tokens=3", x)
    measure(
        "apply (qwen-image) vs apply_rotary_emb_qwen", (ours,), (reference.contiguous(),), False
    )


# each class read, built small (random weights, nothing downloaded) with its rotary module
TINY: Final[dict[str, dict[str, Any]]] = {
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
    "Flux2Transformer2DModel": {
        "num_layers": 1,
        "num_single_layers": 1,
        "attention_head_dim": 16,
        "num_attention_heads": 2,
        "joint_attention_dim": 32,
        "timestep_guidance_channels": 16,
        "in_channels": 4,
        "axes_dims_rope": [4, 4, 4, 4],
        "rope_theta": 1000,
    },
    "QwenImageTransformer2DModel": {
        "num_layers": 1,
        "attention_head_dim": 8,
        "num_attention_heads": 2,
        "joint_attention_dim": 16,
        "in_channels": 4,
        "axes_dims_rope": [2, 2, 4],
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
        "rope_theta": 300.0,
    },
    "CogVideoXTransformer3DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 16,
        "in_channels": 4,
        "num_layers": 1,
        "text_embed_dim": 16,
        "time_embed_dim": 8,
        "sample_width": 8,
        "sample_height": 8,
        "sample_frames": 5,
        "use_rotary_positional_embeddings": True,
    },
    "WanTransformer3DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 12,
        "in_channels": 4,
        "out_channels": 4,
        "text_dim": 16,
        "freq_dim": 32,
        "ffn_dim": 32,
        "num_layers": 1,
    },
}
# pixels and frames: the pipelines' grids 11 x 7 (images), 3 x 5 x 4 (videos, patched)
HEIGHT, WIDTH, FRAMES, TEXT = 176, 112, 9, 5


def class_rope(name: str, model: Any) -> tuple[Any, Any]:
    """The class's own rotary module's cos and sin over the pipeline's grid (text first)."""
    torch = lib("torch")
    if name == "FluxTransformer2DModel":
        return tuple(model.pos_embed(flux_ids(TEXT, HEIGHT // 16, WIDTH // 16, torch.float32)))
    if name == "Flux2Transformer2DModel":
        pipeline = lib("diffusers.pipelines.flux2.pipeline_flux2").Flux2Pipeline
        text = pipeline._prepare_text_ids(torch.zeros(1, TEXT, 4))[0]
        image = pipeline._prepare_latent_ids(torch.zeros(1, 4, HEIGHT // 16, WIDTH // 16))[0]
        parts = model.pos_embed(text), model.pos_embed(image)
        return torch.cat([parts[0][0], parts[1][0]]), torch.cat([parts[0][1], parts[1][1]])
    if name == "QwenImageTransformer2DModel":
        shape = [(1, HEIGHT // 16, WIDTH // 16)]
        image, words = model.pos_embed(shape, device="cpu", max_txt_seq_len=TEXT)
        freqs = torch.cat([words, image])
        return freqs.real.repeat_interleave(2, dim=-1), freqs.imag.repeat_interleave(2, dim=-1)
    if name == "CogVideoXTransformer3DModel":
        pipeline = lib("diffusers.pipelines.cogvideo.pipeline_cogvideox").CogVideoXPipeline
        owner = SimpleNamespace(transformer=model, vae_scale_factor_spatial=8)
        frames = (FRAMES - 1) // 4 + 1
        return tuple(
            pipeline._prepare_rotary_positional_embeddings(owner, HEIGHT, WIDTH, frames, "cpu")
        )
    latent = torch.zeros(1, 4, (FRAMES - 1) // 4 + 1, HEIGHT // 8, WIDTH // 8)
    cos, sin = model.rope(latent)
    return cos.reshape(-1, cos.shape[-1]), sin.reshape(-1, sin.shape[-1])


def test_every_class_read_is_built_here() -> None:
    from service.schemas.rope_nd import CLASSES

    assert set(CLASSES) == set(TINY)


@pytest.mark.parametrize("name", sorted(TINY))
def test_from_config_is_the_class_s_rope(service: httpx.Client, name: str) -> None:
    diffusers = lib("diffusers")
    model = getattr(diffusers, name).from_config(TINY[name])
    size = f"height={HEIGHT}&width={WIDTH}&frames={FRAMES}"
    text = "" if "Video" in name or "Wan" in name else f"&text_tokens={TEXT}"
    answer = service.post(
        f"{TABLE}/from-config?{size}{text}&format=npz", json={"_class_name": name, **TINY[name]}
    )
    assert answer.status_code == 200, answer.text
    found = np.load(io.BytesIO(answer.content), allow_pickle=False)
    reference = tuple(part.float().contiguous() for part in class_rope(name, model))
    float64 = name.startswith("Flux") or "Wan" in name
    measure(f"from-config {name}", (found["cos"], found["sin"]), reference, bitwise=float64)


def cogvideox_rope(frames: int, height: int, width: int, sliced: bool) -> tuple[Any, Any]:
    """diffusers' CogVideoX pipelines' ``_prepare_rotary_positional_embeddings`` at a grid
    in patches, the base size CogVideoX's (sample 60 x 90 latent cells, patch 2: 30 x 45)."""
    embeddings = lib("diffusers.models.embeddings")
    if sliced:
        return tuple(
            embeddings.get_3d_rotary_pos_embed(
                64, None, (height, width), frames, grid_type="slice", max_size=(30, 45)
            )
        )
    pipeline = lib("diffusers.pipelines.cogvideo.pipeline_cogvideox")
    crop = pipeline.get_resize_crop_region_for_grid((height, width), 45, 30)
    return tuple(embeddings.get_3d_rotary_pos_embed(64, crop, (height, width), frames))


@pytest.mark.parametrize(
    ("preset", "grid"),
    [
        ("cogvideox", (13, 30, 45)),
        ("cogvideox", (13, 20, 60)),
        ("cogvideox", (7, 48, 32)),
        ("cogvideox-1.5", (11, 30, 40)),
    ],
)
def test_cogvideox(
    service: httpx.Client, monkeypatch: pytest.MonkeyPatch, preset: str, grid: tuple[int, int, int]
) -> None:
    reference = cogvideox_rope(*grid, sliced=preset == "cogvideox-1.5")
    query = f"grid={','.join(map(str, grid))}&preset={preset}"
    name = f"{preset} {'x'.join(map(str, grid))} vs get_3d_rotary_pos_embed"
    measure(name, served(service, query), reference, bitwise=False)
    torch_functions(monkeypatch)  # the same table, not from the cache
    wide = served(service, query + "&dtype=float64")
    measure(
        f"{name}, torch's pow, sin, cos", wide, (reference[0].double(), reference[1].double()), True
    )


@pytest.mark.parametrize(
    ("preset", "grid", "text"),
    [
        ("flux2", (3, 5), 4),
        ("qwen-image", (5, 4), 2),
        ("cogvideox", (2, 7, 11), 0),
        ("hunyuan-video", (3, 4, 4), 0),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exact_is_50_digit_arithmetic_rounded(
    service: httpx.Client, preset: str, grid: tuple[int, ...], text: int, dtype: str
) -> None:
    """Every entry within half an ulp (float64: 2^-51) of cos and sin of ``id * theta^(-2i/d)``
    to 50 digits, at the ids the preset gives its tokens (negative, centred ones; CogVideoX's
    float32 linspace ones)."""
    mpmath = lib("mpmath")
    size = ",".join(map(str, grid))
    query = f"grid={size}&preset={preset}" + (f"&text_tokens={text}" if text else "")
    cos, sin = served(service, f"{query}&rounding=exact&dtype={dtype}")
    key = rope_nd.preset_key(
        preset, grid, {"text_tokens": text or None}, None, "interleaved", "exact", "float64"
    )
    ids = rope_nd.ids(key, np.arange(key.tokens)).astype(np.float32).astype(np.float64)
    largest = 0.0
    with mpmath.workdps(50):
        for row in range(0, key.tokens, max(1, key.tokens // 12)):
            column = 0
            for axis, d in enumerate(key.axes_dim):
                for i in range(d // 2):
                    angle = mpmath.mpf(float(ids[axis, row])) * mpmath.power(
                        mpmath.mpf(key.theta), mpmath.mpf(-2 * i) / d
                    )
                    for ours, true in ((cos, mpmath.cos(angle)), (sin, mpmath.sin(angle))):
                        value = float(ours[row, column])
                        bound = (
                            float(np.spacing(np.float32(abs(value)))) / 2
                            if dtype == "float32"
                            else 2.0**-51
                        )
                        error = abs(mpmath.mpf(value) - true)
                        assert error <= bound, (preset, row, axis, i, value, true)
                        largest = max(largest, float(error / bound))
                    column += 2
    FIGURES[f"exact {preset} {dtype}"] = {"largest_error_over_bound": largest}


@pytest.mark.parametrize(
    ("preset", "grid", "text"),
    [
        ("hunyuan-video", (4, 30, 36), 0),
        ("qwen-image", (30, 23), 5),
        ("cogvideox", (13, 30, 45), 0),
    ],
)
@pytest.mark.usefixtures("numpy_engine")
def test_float32_presets_without_torch(preset: str, grid: tuple[int, ...], text: int) -> None:
    """The numpy engine: correctly rounded pow, cos and sin in the library's order, within
    the bound of torch's (the same table with the torch engine); the share apart measured."""
    given = {"text_tokens": text or None}
    key = rope_nd.preset_key(preset, grid, given, None, "interleaved", "library", "float32")
    positions = np.arange(key.tokens)
    ours = rope_nd.take(key, positions)
    kernels.use("torch")
    try:
        theirs = rope_nd.take(key, positions)
    finally:
        kernels.use("numpy")
    difference = np.abs(ours.astype(np.float64) - theirs)
    apart = int((ours != theirs).sum())
    FIGURES[f"numpy engine {preset}"] = {
        "entries": int(ours.size),
        "bit_for_bit": 1 - apart / ours.size,
        "largest_difference": float(difference.max(initial=0.0)),
    }
    assert difference.max(initial=0.0) <= 2e-4
