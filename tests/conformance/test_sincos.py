"""Conformance: 2-D and 3-D sin-cos grid tables against the real code (no weights):

- MAE's and DiT's ``get_2d_sincos_pos_embed`` (facebookresearch/DiT ed81ce2, ``models.py``,
  transcribed below; MAE efb2a80 ``util/pos_embed.py`` is the same arithmetic with
  ``np.float``, and one zero row for its cls token), then ``torch.from_numpy(...).float()``;
- diffusers 0.42.1's ``get_2d_sincos_pos_embed`` (PixArt-α/Σ's and DiT's grids, a
  rectangle, extra tokens) then ``.float()``, and the ``PatchEmbed`` modules of PixArt and
  SD3 (``pos_embed_max_size``, ``cropped_pos_embed``) built from their arguments;
- timm 1.0.31's ``build_sincos2d_pos_embed`` (loaded by file: ``import timm`` needs
  torchvision) with ``interleave_sin_cos`` and ``reverse_coord``;
- diffusers' ``get_3d_sincos_pos_embed`` and CogVideoX-2b's ``CogVideoXPatchEmbed``;
- ``POST .../from-config`` of each class read, against the buffer of the class built
  from a tiny config with ``from_config`` (random weights, nothing downloaded).

``rounding=library``: the share of entries bit for bit and the largest difference in
float32 ulps, written to ``artifacts/conformance-sincos.json``; with torch's own float32
pow, sin and cos in place of the correctly rounded ones, timm's table is bit for bit
(asserted). ``rounding=exact`` is within half a float32 ulp (float64: 2^-51) of 50-digit
arithmetic (mpmath) at the real positions."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import json
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray

from service.encodings import _library, sincos2d
from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [
    name for name in ("torch", "diffusers", "timm") if importlib.util.find_spec(name) is None
]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

TABLE_2D: Final = "/v1/encodings/sincos-2d"
TABLE_3D: Final = "/v1/encodings/sincos-3d"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-sincos.json"
FIGURES: Final[dict[str, dict[str, Any]]] = {}


@functools.cache
def lib(name: str) -> Any:
    return importlib.import_module(name)


@functools.cache
def timm_sincos() -> Any:
    """timm 1.0.31's ``layers/pos_embed_sincos.py`` under stub parent packages: the
    package's ``__init__`` imports torchvision, which the environment does not hold."""
    spec = importlib.util.find_spec("timm")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, path in (("timm", root), ("timm.layers", root / "layers")):
        stub = types.ModuleType(name)
        stub.__path__ = [str(path)]
        sys.modules.setdefault(name, stub)
    return importlib.import_module("timm.layers.pos_embed_sincos")


@pytest.fixture(scope="module", autouse=True)
def figures() -> Iterator[None]:
    """The measured figures, written once the module's tests have run."""
    yield
    if FIGURES:
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(json.dumps(FIGURES, indent=1, sort_keys=True) + "\n")
        print("\n\nConformance, sin-cos grids:\n" + json.dumps(FIGURES, indent=1))


def served(service: httpx.Client, path: str, query: str) -> NDArray[Any]:
    answer = service.get(f"{path}?{query}&format=npy")
    assert answer.status_code == 200, answer.text
    found: NDArray[Any] = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found


def measure(name: str, ours: NDArray[np.float32], reference: NDArray[np.float32]) -> None:
    """The share of entries bit for bit and the largest difference, recorded under
    ``name``; every entry within a few float32 ulps of 1 (the float64 functions' and
    torch's float32 functions' error, carried by angles of at most a few hundred)."""
    assert ours.shape == reference.shape
    assert ours.dtype == reference.dtype == np.float32
    unit = np.spacing(np.maximum(np.abs(reference), np.finfo(np.float32).tiny))
    difference = np.abs(ours.astype(np.float64) - reference.astype(np.float64))
    FIGURES[name] = {
        "entries": int(ours.size),
        "bit_for_bit": float((ours == reference).mean()),
        "largest_ulps": float((difference / unit).max(initial=0.0)),
        "largest_difference": float(difference.max(initial=0.0)),
    }
    assert difference.max(initial=0.0) <= 2.0**-20


# DiT ed81ce2 models.py (MAE efb2a80 util/pos_embed.py: the same, np.float for float64)
def dit_2d(embed_dim: int, grid_size: int, cls_token: bool = False, extra_tokens: int = 0) -> Any:
    grid_h = np.arange(grid_size, dtype=np.float32)
    grid_w = np.arange(grid_size, dtype=np.float32)
    grid: Any = np.meshgrid(grid_w, grid_h)  # here w goes first
    grid = np.stack(grid, axis=0)
    grid = grid.reshape([2, 1, grid_size, grid_size])
    pos_embed = dit_2d_from_grid(embed_dim, grid)
    if cls_token and extra_tokens > 0:
        pos_embed = np.concatenate([np.zeros([extra_tokens, embed_dim]), pos_embed], axis=0)
    return pos_embed


def dit_2d_from_grid(embed_dim: int, grid: Any) -> Any:
    assert embed_dim % 2 == 0
    emb_h = dit_1d(embed_dim // 2, grid[0])  # (H*W, D/2)
    emb_w = dit_1d(embed_dim // 2, grid[1])  # (H*W, D/2)
    return np.concatenate([emb_h, emb_w], axis=1)  # (H*W, D)


def dit_1d(embed_dim: int, pos: Any) -> Any:
    assert embed_dim % 2 == 0
    omega = np.arange(embed_dim // 2, dtype=np.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000**omega  # (D/2,)
    pos = pos.reshape(-1)  # (M,)
    out = np.einsum("m,d->md", pos, omega)  # (M, D/2), outer product
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)  # (M, D)


def as_float(table: Any) -> NDArray[np.float32]:
    """``torch.from_numpy(table).float()`` (or a tensor's ``.float()``), as the models do."""
    torch = lib("torch")
    tensor = torch.from_numpy(table) if isinstance(table, np.ndarray) else table
    found: NDArray[np.float32] = tensor.float().numpy()
    return found


@pytest.mark.parametrize(("dim", "grid", "extra"), [(1152, 16, 1), (768, 14, 0), (1152, 32, 0)])
def test_mae_is_dit_s_numpy(service: httpx.Client, dim: int, grid: int, extra: int) -> None:
    reference = as_float(dit_2d(dim, grid, cls_token=extra > 0, extra_tokens=extra))
    ours = served(
        service, TABLE_2D, f"height={grid}&width={grid}&dim={dim}&preset=mae&extra_tokens={extra}"
    )
    np.testing.assert_array_equal(ours, reference)
    measure(f"mae/{dim}/{grid}x{grid}", ours, reference)


DIFFUSERS_GRIDS: Final = [
    # (dim, (height, width), base_size, interpolation_scale, extra_tokens)
    (1152, (64, 64), 64, 2.0, 0),  # PixArt-α 1024 px
    (1152, (128, 128), 128, 4.0, 0),  # PixArt-Σ 2048 px
    (1152, (48, 80), 64, 2.0, 0),  # PixArt at 768 × 1280 px
    (1152, (16, 16), 16, 1.0, 0),  # DiT 256 px
    (1152, (32, 32), 32, 0.5, 1),  # PixArt-Σ 256 px, an extra token
    (1024, (30, 45), 16, 1.875, 0),
]


@pytest.mark.parametrize(("dim", "grid", "base", "scale", "extra"), DIFFUSERS_GRIDS)
def test_diffusers_function(
    service: httpx.Client,
    dim: int,
    grid: tuple[int, int],
    base: int,
    scale: float,
    extra: int,
) -> None:
    embeddings = lib("diffusers.models.embeddings")
    reference = as_float(
        embeddings.get_2d_sincos_pos_embed(
            dim,
            grid,
            cls_token=extra > 0,
            extra_tokens=extra,
            interpolation_scale=scale,
            base_size=base,
        )
    )
    query = (
        f"height={grid[0]}&width={grid[1]}&dim={dim}&preset=diffusers&base_size={base}"
        f"&interpolation_scale={scale}&extra_tokens={extra}"
    )
    measure(
        f"diffusers/{dim}/{grid[0]}x{grid[1]}/{base}/{scale}",
        served(service, TABLE_2D, query),
        reference,
    )


def test_diffusers_equals_dit_at_its_own_grid(service: httpx.Client) -> None:
    """base_size equal to the grid, scale 1: the positions are the indices."""
    reference = as_float(dit_2d(1152, 32))
    ours = served(service, TABLE_2D, "height=32&width=32&dim=1152&preset=diffusers&base_size=32")
    np.testing.assert_array_equal(ours, reference)


@pytest.mark.parametrize(("height", "width"), [(64, 64), (128, 96), (32, 50), (96, 96)])
def test_sd3_patch_embed_crop(service: httpx.Client, height: int, width: int) -> None:
    torch = lib("torch")
    embeddings = lib("diffusers.models.embeddings")
    module = embeddings.PatchEmbed(
        height=128, width=128, patch_size=2, in_channels=16, embed_dim=1536, pos_embed_max_size=192
    )
    with torch.no_grad():
        reference = module.cropped_pos_embed(2 * height, 2 * width)[0].numpy()
    ours = served(service, TABLE_2D, f"height={height}&width={width}&dim=1536&preset=sd3")
    measure(f"sd3/1536/{height}x{width}", ours, reference)


def test_pixart_patch_embed_buffer(service: httpx.Client) -> None:
    embeddings = lib("diffusers.models.embeddings")
    module = embeddings.PatchEmbed(
        height=128, width=128, patch_size=2, in_channels=4, embed_dim=1152, interpolation_scale=2
    )
    reference = module.pos_embed[0].numpy()
    ours = served(
        service,
        TABLE_2D,
        "height=64&width=64&dim=1152&preset=diffusers&base_size=64&interpolation_scale=2",
    )
    measure("PatchEmbed pixart-alpha/1152/64x64", ours, reference)


TIMM_CASES: Final = [
    (dim, grid, interleave, reverse)
    for dim, grid in ((768, (14, 14)), (384, (16, 24)), (64, (7, 5)))
    for interleave in (False, True)
    for reverse in (False, True)
]


def timm_reference(dim: int, grid: tuple[int, int], interleave: bool, reverse: bool) -> Any:
    found: NDArray[np.float32] = (
        timm_sincos()
        .build_sincos2d_pos_embed(
            list(grid), dim=dim, interleave_sin_cos=interleave, reverse_coord=reverse
        )
        .numpy()
    )
    return found


def timm_query(dim: int, grid: tuple[int, int], interleave: bool, reverse: bool) -> str:
    return (
        f"height={grid[0]}&width={grid[1]}&dim={dim}&preset=timm"
        f"&interleave_sin_cos={str(interleave).lower()}&reverse_coord={str(reverse).lower()}"
    )


@pytest.mark.parametrize(("dim", "grid", "interleave", "reverse"), TIMM_CASES)
def test_timm(
    service: httpx.Client, dim: int, grid: tuple[int, int], interleave: bool, reverse: bool
) -> None:
    reference = timm_reference(dim, grid, interleave, reverse)
    ours = served(service, TABLE_2D, timm_query(dim, grid, interleave, reverse))
    measure(f"timm/{dim}/{grid[0]}x{grid[1]}/{interleave}/{reverse}", ours, reference)


@pytest.mark.parametrize(("dim", "grid", "interleave", "reverse"), TIMM_CASES)
def test_timm_with_torch_s_functions_is_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch,
    dim: int,
    grid: tuple[int, int],
    interleave: bool,
    reverse: bool,
) -> None:
    torch = lib("torch")

    def pow32(base: np.float32, exponent: NDArray[np.float32]) -> NDArray[np.float32]:
        found: NDArray[np.float32] = (float(base) ** torch.from_numpy(exponent)).numpy()
        return found

    def sincos(angles: NDArray[Any]) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        tensor = torch.from_numpy(np.ascontiguousarray(angles, np.float32))
        return torch.sin(tensor).numpy(), torch.cos(tensor).numpy()

    monkeypatch.setattr(_library, "pow32", pow32)
    monkeypatch.setattr(_library, "sincos", sincos)
    key = sincos2d.preset_key(
        dim,
        *grid,
        "timm",
        {"interleave_sin_cos": interleave, "reverse_coord": reverse},
        "library",
        "float32",
    )
    ours = sincos2d.take(key, np.arange(key.rows))
    np.testing.assert_array_equal(ours, timm_reference(dim, grid, interleave, reverse))


THREE_D: Final = [
    # (dim, frames, (height, width), spatial scale, temporal scale)
    (1920, 13, (30, 45), 1.875, 1.0),  # CogVideoX-2b 480 × 720, 49 frames
    (64, 4, (5, 3), 1.0, 1.0),
    (256, 7, (6, 8), 0.5, 2.0),
]


@pytest.mark.parametrize(("dim", "frames", "grid", "spatial", "temporal"), THREE_D)
def test_diffusers_3d_function(
    service: httpx.Client,
    dim: int,
    frames: int,
    grid: tuple[int, int],
    spatial: float,
    temporal: float,
) -> None:
    embeddings = lib("diffusers.models.embeddings")
    height, width = grid
    table = embeddings.get_3d_sincos_pos_embed(
        dim, (width, height), frames, spatial, temporal
    ).flatten(0, 1)
    query = (
        f"frames={frames}&height={height}&width={width}&dim={dim}"
        f"&spatial_interpolation_scale={spatial}&temporal_interpolation_scale={temporal}"
    )
    measure(
        f"3d/{dim}/{frames}x{height}x{width}/{spatial}/{temporal}",
        served(service, TABLE_3D, query),
        as_float(table),
    )


def test_cogvideox_patch_embed(service: httpx.Client) -> None:
    torch = lib("torch")
    embeddings = lib("diffusers.models.embeddings")
    module = embeddings.CogVideoXPatchEmbed(
        patch_size=2, in_channels=16, embed_dim=1920, text_embed_dim=32
    )
    reference = module.pos_embedding[0].to(torch.float32).numpy()
    ours = served(service, TABLE_3D, "frames=13&height=30&width=45&dim=1920&preset=cogvideox")
    measure("CogVideoXPatchEmbed 2b/1920", ours, reference)


def oracle_2d(key: sincos2d.Sincos2DKey, row: int) -> list[Any]:
    """Row ``row`` of the table at the real positions, to 50 digits."""
    mpmath = lib("mpmath")
    zero = [mpmath.mpf(0)] * key.dim
    token = row - key.extra_tokens
    if token < 0:
        return zero
    with mpmath.workdps(50):
        if key.reverse_coord:
            j, i = divmod(token, key.grid_height)
        else:
            i, j = divmod(token, key.grid_width)
        count = key.dim // 4
        omega = [mpmath.mpf(key.temperature) ** (-mpmath.mpf(k) / count) for k in range(count)]
        positions = []
        for index, size in ((i, key.grid_height), (j, key.grid_width)):
            if key.base_size is None:
                positions.append(mpmath.mpf(index))
                continue
            scale = mpmath.mpf(key.interpolation_scale)
            side = size if key.pos_embed_max_size is None else key.pos_embed_max_size
            index += (side - size) // 2
            positions.append(mpmath.mpf(index) * key.base_size / (side * scale))
        blocks = {
            (axis, part): [
                (mpmath.sin if part == "sin" else mpmath.cos)(positions[axis] * w) for w in omega
            ]
            for axis in (0, 1)
            for part in ("sin", "cos")
        }
    return [value for block in sincos2d._layout(key) for value in blocks[block]]


EXACT_2D: Final = [
    ("mae", "height=6&width=7&dim=64&extra_tokens=1"),
    ("diffusers", "height=6&width=10&dim=64&base_size=64&interpolation_scale=2"),
    ("diffusers", "height=9&width=9&dim=32&base_size=16&interpolation_scale=1.875"),
    ("sd3", "height=8&width=5&dim=32&pos_embed_max_size=192"),
    ("timm", "height=5&width=8&dim=32&interleave_sin_cos=true&reverse_coord=true"),
]


@pytest.mark.parametrize(("preset", "query"), EXACT_2D)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exact_2d_is_50_digit_arithmetic_rounded(
    service: httpx.Client, preset: str, query: str, dtype: str
) -> None:
    mpmath = lib("mpmath")
    ours = served(service, TABLE_2D, f"{query}&preset={preset}&rounding=exact&dtype={dtype}")
    fields = dict(pair.split("=") for pair in query.split("&"))
    given = {
        name: (value == "true") if value in ("true", "false") else float(value)
        for name, value in fields.items()
        if name not in ("height", "width", "dim")
    }
    given = {
        name: int(value) if name != "interpolation_scale" and not isinstance(value, bool) else value
        for name, value in given.items()
    }
    key = sincos2d.preset_key(
        int(fields["dim"]),
        int(fields["height"]),
        int(fields["width"]),
        preset,
        given,
        "exact",
        "float64",
    )
    largest = 0.0
    for r, row in enumerate(ours):
        for value, true in zip(row, oracle_2d(key, r), strict=True):
            bound = (
                float(np.spacing(np.float32(abs(value)))) / 2 if dtype == "float32" else 2.0**-51
            )
            error = abs(mpmath.mpf(float(value)) - true)
            assert error <= bound, (preset, r, value, true)
            largest = max(largest, float(error / bound))
    FIGURES[f"exact 2d {preset} {dtype} {query}"] = {
        "entries": int(ours.size),
        "largest_error_over_bound": largest,
    }


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exact_3d_is_50_digit_arithmetic_rounded(service: httpx.Client, dtype: str) -> None:
    mpmath = lib("mpmath")
    dim, frames, height, width = 32, 3, 4, 5
    ours = served(
        service,
        TABLE_3D,
        f"frames={frames}&height={height}&width={width}&dim={dim}&preset=cogvideox"
        f"&rounding=exact&dtype={dtype}&start=224",
    )
    largest = 0.0
    with mpmath.workdps(50):
        spatial, temporal = mpmath.mpf(1.875), mpmath.mpf(1)
        ws = [mpmath.mpf(10000) ** (-mpmath.mpf(k) / (3 * dim // 16)) for k in range(3 * dim // 16)]
        wt = [mpmath.mpf(10000) ** (-mpmath.mpf(k) / (dim // 8)) for k in range(dim // 8)]
        for r, row in enumerate(ours):
            token = r + 224 - 226
            if token < 0:
                expected = [mpmath.mpf(0)] * dim
            else:
                t, cell = divmod(token, height * width)
                i, j = divmod(cell, width)
                pt, py, px = t / temporal, i / spatial, j / spatial
                expected = (
                    [mpmath.sin(pt * w) for w in wt]
                    + [mpmath.cos(pt * w) for w in wt]
                    + [mpmath.sin(px * w) for w in ws]
                    + [mpmath.cos(px * w) for w in ws]
                    + [mpmath.sin(py * w) for w in ws]
                    + [mpmath.cos(py * w) for w in ws]
                )
            for value, true in zip(row, expected, strict=True):
                bound = (
                    float(np.spacing(np.float32(abs(value)))) / 2
                    if dtype == "float32"
                    else 2.0**-51
                )
                error = abs(mpmath.mpf(float(value)) - true)
                assert error <= bound, (r, value, true)
                largest = max(largest, float(error / bound))
    FIGURES[f"exact 3d cogvideox {dtype}"] = {
        "entries": int(ours.size),
        "largest_error_over_bound": largest,
    }


# each class's config, as small as its constructor allows
TINY: Final[dict[str, dict[str, Any]]] = {
    "SD3Transformer2DModel": {
        "sample_size": 8,
        "patch_size": 2,
        "in_channels": 4,
        "num_layers": 1,
        "attention_head_dim": 8,
        "num_attention_heads": 2,
        "joint_attention_dim": 16,
        "caption_projection_dim": 16,
        "pooled_projection_dim": 16,
        "out_channels": 4,
        "pos_embed_max_size": 16,
    },
    "PixArtTransformer2DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 8,
        "in_channels": 4,
        "num_layers": 1,
        "sample_size": 16,
        "patch_size": 2,
        "cross_attention_dim": 16,
        "caption_channels": 16,
        "out_channels": 8,
        "interpolation_scale": 0.5,
    },
    "DiTTransformer2DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 8,
        "in_channels": 4,
        "num_layers": 1,
        "sample_size": 8,
        "num_embeds_ada_norm": 10,
        "out_channels": 8,
    },
    "LatteTransformer3DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 8,
        "in_channels": 4,
        "num_layers": 1,
        "sample_size": 8,
        "patch_size": 2,
        "caption_channels": 16,
        "cross_attention_dim": 16,
        "video_length": 2,
        "out_channels": 8,
    },
    "CogVideoXTransformer3DModel": {
        "num_attention_heads": 2,
        "attention_head_dim": 8,
        "in_channels": 4,
        "num_layers": 1,
        "sample_width": 8,
        "sample_height": 6,
        "sample_frames": 9,
        "text_embed_dim": 16,
        "time_embed_dim": 16,
        "max_text_seq_length": 4,
        "out_channels": 4,
    },
}


def test_every_class_read_is_built_here() -> None:
    from service.schemas.sincos import CLASSES_2D, CLASSES_3D

    assert set(CLASSES_2D) | set(CLASSES_3D) == set(TINY)


def from_config(service: httpx.Client, path: str, name: str, query: str) -> NDArray[np.float32]:
    answer = service.post(
        f"{path}/from-config?{query}&format=npy", json={"_class_name": name, **TINY[name]}
    )
    assert answer.status_code == 200, answer.text
    found: NDArray[np.float32] = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found


# (height, width) in pixels: the config's own (None), and another picture
@pytest.mark.parametrize("pixels", [None, (80, 96)])
@pytest.mark.parametrize(
    "name",
    [
        "SD3Transformer2DModel",
        "PixArtTransformer2DModel",
        "DiTTransformer2DModel",
        "LatteTransformer3DModel",
    ],
)
def test_from_config_is_the_class_s_patch_embed(
    service: httpx.Client, name: str, pixels: tuple[int, int] | None
) -> None:
    torch = lib("torch")
    diffusers = lib("diffusers")
    embeddings = lib("diffusers.models.embeddings")
    module = getattr(diffusers, name).from_config(TINY[name]).pos_embed
    patch = module.patch_size
    if pixels is None:
        latent = (module.height * patch, module.width * patch)
        query = ""
    else:
        latent = (pixels[0] // 8, pixels[1] // 8)
        query = f"height={pixels[0]}&width={pixels[1]}"
    with torch.no_grad():
        if module.pos_embed_max_size:
            reference = module.cropped_pos_embed(*latent)[0].numpy()
        elif pixels is None:
            reference = module.pos_embed[0].numpy()
        else:  # forward's table for a picture of another size
            reference = as_float(
                embeddings.get_2d_sincos_pos_embed(
                    module.pos_embed.shape[-1],
                    (latent[0] // patch, latent[1] // patch),
                    base_size=module.base_size,
                    interpolation_scale=module.interpolation_scale,
                )
            )
    ours = from_config(service, TABLE_2D, name, query)
    measure(f"from-config {name} {pixels}", ours, reference)
    np.testing.assert_array_equal(ours, reference)


@pytest.mark.parametrize("video", [None, (13, 64, 80)])
def test_from_config_is_cogvideox_s_patch_embed(
    service: httpx.Client, video: tuple[int, int, int] | None
) -> None:
    torch = lib("torch")
    diffusers = lib("diffusers")
    name = "CogVideoXTransformer3DModel"
    module = getattr(diffusers, name).from_config(TINY[name]).patch_embed
    with torch.no_grad():
        if video is None:
            table, query = module.pos_embedding, ""
        else:
            frames, height, width = video
            table = module._get_positional_embeddings(height // 8, width // 8, frames)
            query = f"frames={frames}&height={height}&width={width}"
    reference = table[0].to(torch.float32).numpy()
    ours = from_config(service, TABLE_3D, name, query)
    measure(f"from-config {name} {video}", ours, reference)
    np.testing.assert_array_equal(ours, reference)
