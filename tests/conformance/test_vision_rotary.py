"""Conformance: vision towers' 2-D rotary embeddings against the real code (no weights):

- transformers 5.23's ``Qwen2VLVisionRotaryEmbedding``, ``Qwen2_5_VLVisionRotaryEmbedding``
  and ``Qwen3VLVisionRotaryEmbedding`` (heads 80, 80, 72: Qwen2-VL's and Qwen3-VL's class
  defaults, Qwen2.5-VL-7B's ``hidden_size`` 1280) at the ids of
  ``vision_utils.get_vision_position_ids`` (block-major over the 2 x 2 merge blocks), and
  Qwen2.5-VL's window order: ``get_vision_window_index`` (112 px windows, patch 14) as the
  tower's ``permute_input_for_window_attn`` applies it to the tables;
- ``PixtralVisionRotaryEmbedding`` (Pixtral-12B's defaults: head 64, theta 10000) at the
  row-major ids ``PixtralVisionModel`` builds, and its bfloat16 table (the activation dtype)
  as the float32 one rounded;
- ``Llama4VisionRotaryEmbedding``'s complex64 ``freqs_ci`` (Llama-4-Scout's vision config:
  24 x 24 patches and the class token last, head 88; and the class defaults), as cos and sin
  each twice (interleaved pairs);
- DINOv3: facebookresearch/dinov3's ``RopePositionEmbedding`` (transcribed below at
  6876159), in float32 and with its periods rounded to bfloat16 (a bf16-trained buffer);
  timm 1.0.31's ``RotaryEmbeddingDinoV3`` as ``vit_small_patch16_dinov3`` creates it;
  transformers' ``DINOv3ViTRopePositionEmbedding``; ViT-S/16 (head 64, base 100) on 14 x 14
  and 10 x 16 with ``normalize_coords`` separate, min and max where the implementation has
  them, and head 80 (where transformers' exponents are not the original's);
- EVA-02: timm's ``RotaryEmbeddingCat`` as ``eva02_base_patch14_448`` creates it (32 x 32,
  ``ref_feat_shape`` 16 x 16), its ``[sin | cos]`` split;
- ``model=`` alone: the module as its checkpoint's config builds it, over its image;
- ``POST .../positions`` with the ids of a sequence of several images (Qwen-VL's,
  Pixtral's) against the modules at those ids;
- ``POST .../apply`` against each model's apply function (Qwen's
  ``apply_rotary_pos_emb_vision``, Pixtral's ``apply_rotary_pos_emb``, Llama 4's
  ``vision_apply_rotary_emb``, timm's ``apply_rot_embed_cat``, DINOv3's transformers
  ``apply_rotary_pos_emb``) on a float32 batch;
- ``rounding=exact`` within half a float32 ulp of 50-digit arithmetic (mpmath).

Every ``rounding=library`` table is fetched over HTTP (npz ``cos`` and ``sin``) and, with
the torch library engine the conformance session runs, is the module's bit for bit, as is
every apply (asserted: 100 % of entries, measured); with the numpy engine (correctly rounded
pow, cos and sin) the tables are within an ulp of an entry of torch's (measured: 93 to 97 %
of entries bit for bit, at most 2^-24 apart). The figures are written to
``artifacts/conformance-vision-rotary.json``."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any, Final

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray

from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [
    name
    for name in ("torch", "transformers", "diffusers", "timm", "mpmath")
    if importlib.util.find_spec(name) is None
]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )

from tests.conformance.test_sincos import timm_sincos  # noqa: E402  (needs torch)

TABLE: Final = "/v1/encodings/vision-rotary"
ARTIFACT: Final = ROOT / "artifacts" / "conformance-vision-rotary.json"
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
        print("\n\nConformance, vision rotary:\n" + json.dumps(FIGURES, indent=1))


def served(service: httpx.Client, query: str) -> tuple[NDArray[Any], NDArray[Any]]:
    answer = service.get(f"{TABLE}?{query}&format=npz")
    assert answer.status_code == 200, answer.text
    found = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found["cos"], found["sin"]


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


def measure(name: str, ours: Sequence[Any], reference: Sequence[Any]) -> None:
    """The share of entries bit for bit and the largest difference, recorded under
    ``name``, the first entry apart named; then every entry must be the same."""
    got = np.stack([np.asarray(part) for part in ours])
    want = np.stack(
        [np.asarray(part.numpy() if hasattr(part, "numpy") else part) for part in reference]
    )
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    difference = np.abs(got.astype(np.float64) - want)
    apart = np.argwhere(got != want)
    FIGURES[name] = {
        "entries": int(got.size),
        "bit_for_bit": float((got == want).mean()),
        "largest_difference": float(difference.max(initial=0.0)),
    }
    if apart.size:  # (array, row, column): 0 cos, 1 sin (apply: the batch's index)
        where = tuple(int(i) for i in apart[0])
        FIGURES[name]["first_apart"] = {
            "index": list(where),
            "ours": float(got[where]),
            "library": float(want[where]),
        }
    np.testing.assert_array_equal(got, want, err_msg=name)


def rows_of(cos: Any, sin: Any) -> tuple[Any, Any]:
    """A module's (cos, sin) as float32 numpy tables."""
    return cos.float().contiguous().numpy(), sin.float().contiguous().numpy()


# Qwen2-VL, Qwen2.5-VL, Qwen3-VL ---------------------------------------------------------

QWEN: Final[dict[str, tuple[str, str, str, dict[str, Any]]]] = {
    # model: (module, config, rotary class, vision_config); heads 80, 80, 72
    "qwen2_vl": ("qwen2_vl", "Qwen2VLConfig", "Qwen2VLVisionRotaryEmbedding", {}),
    "qwen2_5_vl": (
        "qwen2_5_vl",
        "Qwen2_5_VLConfig",
        "Qwen2_5_VLVisionRotaryEmbedding",
        # Qwen2.5-VL-7B-Instruct's: the class default hidden_size is 3584 (head 224)
        {"hidden_size": 1280, "num_heads": 16, "spatial_merge_size": 2, "window_size": 112},
    ),
    "qwen3_vl": ("qwen3_vl", "Qwen3VLConfig", "Qwen3VLVisionRotaryEmbedding", {}),
}
QWEN_HEAD: Final = {"qwen2_vl": 80, "qwen2_5_vl": 80, "qwen3_vl": 72}
QWEN_GRIDS: Final = [(1, 4, 4), (2, 6, 8), (1, 12, 20)]
# grids of more than one window of 4 x 4 merged tokens (1 x 4 x 4 and 2 x 6 x 8 are one)
WINDOW_GRIDS: Final = [(1, 4, 12), (2, 10, 12), (1, 12, 20)]


def qwen_rotary(model: str) -> Any:
    module, config, rotary, vision = QWEN[model]
    package = lib(f"transformers.models.{module}.modeling_{module}")
    made = getattr(lib("transformers"), config)(vision_config=vision).vision_config
    return getattr(package, rotary)(made), made


def qwen_ids(grid: tuple[int, int, int]) -> Any:
    """``get_vision_position_ids``: (N, 2) of (h, w), block-major, repeated over t."""
    torch = lib("torch")
    return lib("transformers.vision_utils").get_vision_position_ids(torch.tensor([grid]), 2)


def qwen_window_order(grid: tuple[int, int, int]) -> Any:
    """Row r of what Qwen2.5-VL's attention gets is table row 4 * window_index[r // 4] +
    r % 4 (``get_vision_window_index``, window 112 px, patch 14)."""
    torch = lib("torch")
    window_index, _ = lib("transformers.vision_utils").get_vision_window_index(
        torch.tensor([grid]), spatial_merge_size=2, window_size=112, patch_size=14
    )
    return window_index, (window_index[:, None] * 4 + torch.arange(4)).flatten()


def qwen_query(model: str, grid: tuple[int, int, int], window: bool = False) -> str:
    query = f"model={model}&grid={','.join(map(str, grid))}&head_dim={QWEN_HEAD[model]}"
    query += "&theta=10000&spatial_merge_size=2"
    if window:
        query += "&window_index=true&window_size=112&patch_size=14"
    return query


def qwen_table(model: str, grid: tuple[int, int, int]) -> tuple[Any, Any]:
    """The rotary module at the tower's ids, as ``forward`` returns them (float32)."""
    torch = lib("torch")
    rotary, config = qwen_rotary(model)
    head = (
        getattr(config, "head_dim", None)
        or (getattr(config, "embed_dim", None) or config.hidden_size) // config.num_heads
    )
    assert head == QWEN_HEAD[model]
    assert config.rope_parameters["rope_theta"] == 10000
    return tuple(rotary(torch.zeros(1, dtype=torch.bfloat16), qwen_ids(grid)))


@pytest.mark.parametrize("grid", QWEN_GRIDS, ids=lambda g: "x".join(map(str, g)))
@pytest.mark.parametrize("model", sorted(QWEN))
def test_qwen_vl(service: httpx.Client, model: str, grid: tuple[int, int, int]) -> None:
    cos, sin = qwen_table(model, grid)
    assert cos.dtype == lib("torch").float32  # whatever the activations' dtype
    ours = served(service, qwen_query(model, grid))
    measure(f"{model} {'x'.join(map(str, grid))}", ours, rows_of(cos, sin))


@pytest.mark.parametrize("grid", WINDOW_GRIDS, ids=lambda g: "x".join(map(str, g)))
def test_qwen2_5_vl_window_order(service: httpx.Client, grid: tuple[int, int, int]) -> None:
    """With ``window_index``: the rows ``Qwen2_5_VisionTransformerPretrainedModel.forward``
    hands its blocks (the tables permuted by ``permute_input_for_window_attn``)."""
    package = lib("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
    cos, sin = qwen_table("qwen2_5_vl", grid)
    window_index, order = qwen_window_order(grid)
    tower = SimpleNamespace(spatial_merge_unit=4)
    permute = package.Qwen2_5_VisionTransformerPretrainedModel.permute_input_for_window_attn
    windowed = [permute(tower, part, window_index, seq_len=part.shape[0]) for part in (cos, sin)]
    lib("torch").testing.assert_close(windowed[0], cos[order], rtol=0, atol=0)
    ours = served(service, qwen_query("qwen2_5_vl", grid, window=True))
    measure(f"qwen2_5_vl {'x'.join(map(str, grid))} windows", ours, rows_of(*windowed))


@pytest.mark.parametrize("grid", WINDOW_GRIDS, ids=lambda g: "x".join(map(str, g)))
def test_qwen_patches_are_the_tower_s_ids(grid: tuple[int, int, int]) -> None:
    """``vision_rotary.patches``: each row's (h, w) is ``get_vision_position_ids``'s, in
    the window order with ``window_index``."""
    vision_rotary = lib("service.encodings.vision_rotary")
    ids = qwen_ids(grid).numpy()
    _, order = qwen_window_order(grid)
    for model, window, expected in (
        ("qwen2_vl", False, ids),
        ("qwen2_5_vl", True, ids[order.numpy()]),
    ):
        key = vision_rotary.VisionRotaryKey(
            model=model,
            grid=grid,
            head_dim=80,
            theta=10000.0,
            spatial_merge_size=2,
            window_index=window,
        )
        assert key.tokens == len(ids)
        found = vision_rotary.patches(key, np.arange(key.tokens, dtype=np.int64))
        np.testing.assert_array_equal(found, expected, err_msg=f"{model} {grid}")


# Pixtral --------------------------------------------------------------------------------


def pixtral_rotary() -> Any:
    """``PixtralVisionRotaryEmbedding`` with ``PixtralVisionConfig()``: Pixtral-12B's
    (hidden 1024, 16 heads: head 64, theta 10000)."""
    transformers = lib("transformers")
    config = transformers.PixtralVisionConfig()
    assert config.head_dim == 64
    assert config.rope_parameters["rope_theta"] == 10000
    return lib("transformers.models.pixtral.modeling_pixtral").PixtralVisionRotaryEmbedding(config)


def pixtral_ids(height: int, width: int) -> Any:
    """``PixtralVisionModel.forward``'s ids of one image: row-major (h, w)."""
    torch = lib("torch")
    h, w = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    return torch.stack([h.flatten(), w.flatten()], dim=-1)


@pytest.mark.parametrize("grid", [(4, 4), (7, 5), (16, 11)], ids=lambda g: "x".join(map(str, g)))
def test_pixtral(service: httpx.Client, grid: tuple[int, int]) -> None:
    torch = lib("torch")
    rotary = pixtral_rotary()
    cos, sin = rotary(torch.zeros(1), pixtral_ids(*grid))
    ours = served(service, f"model=pixtral&grid={grid[0]},{grid[1]}&head_dim=64&theta=10000")
    measure(f"pixtral {grid[0]}x{grid[1]}", ours, rows_of(cos, sin))
    # a bfloat16 model gets its table in bfloat16 (``.to(x.dtype)``): the float32 one rounded
    narrow = rotary(torch.zeros(1, dtype=torch.bfloat16), pixtral_ids(*grid))
    for table, part in zip(ours, narrow, strict=True):
        assert torch.equal(torch.from_numpy(table).to(torch.bfloat16), part)


def at(service: httpx.Client, query: str, ids: Any) -> tuple[NDArray[Any], NDArray[Any]]:
    """``POST .../positions`` with ``ids`` (N, 2) of (h, w) posted as (2, N)."""
    answer = service.post(
        f"{TABLE}/positions?{query}&format=npz", json={"position_ids": ids.T.tolist()}
    )
    assert answer.status_code == 200, answer.text
    found = np.load(io.BytesIO(answer.content), allow_pickle=False)
    return found["cos"], found["sin"]


def test_positions_of_several_images(service: httpx.Client) -> None:
    """A sequence of several images: Qwen-VL's ids of ``grid_thw`` [[1, 4, 4], [2, 6, 8]]
    (each image from (0, 0), block-major), Pixtral's of 3 x 4 and 2 x 2 patches (row-major,
    each from (0, 0)), posted: the modules at those ids."""
    torch = lib("torch")
    ids = lib("transformers.vision_utils").get_vision_position_ids(
        torch.tensor([[1, 4, 4], [2, 6, 8]]), 2
    )
    rotary, _ = qwen_rotary("qwen3_vl")
    reference = rows_of(*rotary(torch.zeros(1), ids))
    measure(
        "qwen3_vl positions of two images",
        at(service, qwen_query("qwen3_vl", (1, 4, 4)), ids.numpy()),
        reference,
    )
    ids = torch.cat([pixtral_ids(3, 4), pixtral_ids(2, 2)])
    reference = rows_of(*pixtral_rotary()(torch.zeros(1), ids))
    query = "model=pixtral&grid=3,4&head_dim=64&theta=10000"
    measure("pixtral positions of two images", at(service, query, ids.numpy()), reference)


# Llama 4 --------------------------------------------------------------------------------

LLAMA4: Final[dict[str, dict[str, Any]]] = {
    # Llama-4-Scout-17B-16E's vision_config: 24 x 24 patches, head 88
    "scout": {
        "hidden_size": 1408,
        "num_attention_heads": 16,
        "image_size": 336,
        "patch_size": 14,
        "rope_theta": 10000,
    },
    # Llama4VisionConfig's class defaults: 32 x 32 patches, head 48
    "class-defaults": {},
}


def llama4_freqs(name: str) -> tuple[Any, int, int]:
    """``Llama4VisionRotaryEmbedding(config).freqs_ci`` (complex64, (side² + 1, 1, pairs)),
    the side of its grid and the head_dim."""
    transformers = lib("transformers")
    config = transformers.Llama4Config(vision_config=LLAMA4[name]).vision_config
    rotary = lib("transformers.models.llama4.modeling_llama4").Llama4VisionRotaryEmbedding(config)
    side = config.image_size // config.patch_size
    head = config.hidden_size // config.num_attention_heads
    assert rotary.freqs_ci.shape == (side * side + 1, 1, head // 2)
    return rotary.freqs_ci, side, head


def llama4_query(side: int, head: int) -> str:
    return f"model=llama4&grid={side},{side}&head_dim={head}&theta=10000"


@pytest.mark.parametrize("name", sorted(LLAMA4))
def test_llama4(service: httpx.Client, name: str) -> None:
    """Column 2i and 2i + 1 both hold pair i; the class token is row side², angle 0."""
    freqs, side, head = llama4_freqs(name)
    reference = (
        freqs.real[:, 0].repeat_interleave(2, dim=-1).contiguous().numpy(),
        freqs.imag[:, 0].repeat_interleave(2, dim=-1).contiguous().numpy(),
    )
    cos, sin = served(service, llama4_query(side, head))
    assert (cos[-1] == 1).all()
    assert (sin[-1] == 0).all()
    measure(f"llama4 {name} {side}x{side}", (cos, sin), reference)


def test_llama4_patches() -> None:
    """Row-major (h, w), the class token last as (-1, -1)."""
    vision_rotary = lib("service.encodings.vision_rotary")
    key = vision_rotary.VisionRotaryKey(model="llama4", grid=(1, 24, 24), head_dim=88, theta=1e4)
    assert key.tokens == 577
    found = vision_rotary.patches(key, np.arange(577, dtype=np.int64))
    h, w = np.meshgrid(np.arange(24), np.arange(24), indexing="ij")
    expected = np.concatenate([np.stack([h.ravel(), w.ravel()], -1), [[-1, -1]]])
    np.testing.assert_array_equal(found, expected)


# DINOv3 ---------------------------------------------------------------------------------


def dinov3_original(
    head_dim: int, base: float, height: int, width: int, normalize_coords: str, bf16: bool
) -> tuple[Any, Any]:
    """facebookresearch/dinov3 6876159a11b4df116f30f667f8c9888617df0751,
    ``dinov3/layers/rope_position_encoding.py``: ``RopePositionEmbedding._init_weights``
    (the ``base`` branch) and ``forward`` in eval mode (no shift, jitter, rescale), dtype
    float32 as ``hub/backbones.py`` builds it; ``bf16``: the periods rounded to bfloat16 in
    the float32 buffer, as a bf16-trained ``state_dict`` loads into it. Returns (cos, sin)."""
    torch = lib("torch")
    dd = {"dtype": torch.float32}
    periods = base ** (2 * torch.arange(head_dim // 4, **dd) / (head_dim // 2))  # [D//4]
    if bf16:
        periods = periods.to(torch.bfloat16).float()
    if normalize_coords == "max":
        max_hw = max(height, width)
        coords_h = torch.arange(0.5, height, **dd) / max_hw  # [H]
        coords_w = torch.arange(0.5, width, **dd) / max_hw  # [W]
    elif normalize_coords == "min":
        min_hw = min(height, width)
        coords_h = torch.arange(0.5, height, **dd) / min_hw  # [H]
        coords_w = torch.arange(0.5, width, **dd) / min_hw  # [W]
    else:  # "separate"
        coords_h = torch.arange(0.5, height, **dd) / height  # [H]
        coords_w = torch.arange(0.5, width, **dd) / width  # [W]
    coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing="ij"), dim=-1)  # [H, W, 2]
    coords = coords.flatten(0, 1)  # [HW, 2]
    coords = 2.0 * coords - 1.0  # Shift range [0, 1] to [-1, +1]
    angles = 2 * math.pi * coords[:, :, None] / periods[None, None, :]  # [HW, 2, D//4]
    angles = angles.flatten(1, 2)  # [HW, D//2]
    angles = angles.tile(2)  # [HW, D]
    return torch.cos(angles), torch.sin(angles)


def dinov3_timm(head_dim: int, height: int, width: int, normalize_coords: str) -> tuple[Any, Any]:
    """timm's ``create_rope_embed`` with ``vit_small_patch16_dinov3``'s arguments (eva.py
    ``Eva.__init__``: rope_type 'dinov3', temperature 100, rotate_half, grid 'ij', offset 0,
    no augmentation; ``dynamic_img_size``: no cached grid), then ``get_embed``'s
    ``[sin | cos]``."""
    heads = 6
    rope = (
        timm_sincos()
        .create_rope_embed(
            rope_type="dinov3",
            dim=head_dim * heads,
            num_heads=heads,
            feat_shape=None,
            temperature=100,
            grid_indexing="ij",
            rotate_half=True,
            shift_coords=None,
            jitter_coords=None,
            rescale_coords=None,
            grid_offset=0.0,
            normalize_coords=normalize_coords,
        )
        .eval()
    )
    sin, cos = rope.get_embed((height, width)).chunk(2, -1)
    return cos, sin


def dinov3_transformers(head_dim: int, height: int, width: int) -> tuple[Any, Any]:
    """``DINOv3ViTRopePositionEmbedding`` of a ViT-S/16-like config (6 heads, base 100) on
    float32 pixels of ``height x width`` patches of 16."""
    torch = lib("torch")
    config = lib("transformers").DINOv3ViTConfig(
        hidden_size=6 * head_dim,
        num_attention_heads=6,
        patch_size=16,
        image_size=224,
        rope_theta=100.0,
        num_register_tokens=4,
    )
    package = lib("transformers.models.dinov3_vit.modeling_dinov3_vit")
    rope = package.DINOv3ViTRopePositionEmbedding(config).eval()
    return tuple(rope(torch.zeros(1, 3, 16 * height, 16 * width)))


DINOV3_CASES: Final = [
    pytest.param(
        implementation,
        periods,
        head,
        grid,
        normalize,
        id=f"{implementation}-{periods}-{head}-{grid[0]}x{grid[1]}-{normalize}",
    )
    for head, grid, normalize, implementation, periods in [
        (64, (14, 14), "separate", "original", "float32"),
        (64, (14, 14), "separate", "original", "bfloat16"),
        (64, (10, 16), "separate", "original", "float32"),
        (64, (10, 16), "min", "original", "float32"),
        (64, (10, 16), "max", "original", "bfloat16"),
        (80, (14, 14), "separate", "original", "float32"),
        (80, (10, 16), "max", "original", "bfloat16"),
        (64, (14, 14), "separate", "timm", "float32"),
        (64, (10, 16), "min", "timm", "float32"),
        (64, (10, 16), "max", "timm", "float32"),
        (80, (10, 16), "separate", "timm", "float32"),
        (64, (14, 14), "separate", "transformers", "float32"),
        (64, (10, 16), "separate", "transformers", "float32"),
        (80, (14, 14), "separate", "transformers", "float32"),
        (80, (10, 16), "separate", "transformers", "float32"),
    ]
]


def dinov3_reference(
    implementation: str, periods: str, head: int, grid: tuple[int, int], normalize: str
) -> tuple[Any, Any]:
    if implementation == "original":
        return dinov3_original(head, 100, *grid, normalize, periods == "bfloat16")
    if implementation == "timm":
        return dinov3_timm(head, *grid, normalize)
    assert normalize == "separate"
    return dinov3_transformers(head, *grid)


def dinov3_query(
    implementation: str, periods: str, head: int, grid: tuple[int, int], normalize: str
) -> str:
    return (
        f"model=dinov3&grid={grid[0]},{grid[1]}&head_dim={head}&theta=100"
        f"&implementation={implementation}&normalize_coords={normalize}&periods_dtype={periods}"
    )


@pytest.mark.parametrize(("implementation", "periods", "head", "grid", "normalize"), DINOV3_CASES)
def test_dinov3(
    service: httpx.Client,
    implementation: str,
    periods: str,
    head: int,
    grid: tuple[int, int],
    normalize: str,
) -> None:
    case = (implementation, periods, head, grid, normalize)
    reference = rows_of(*dinov3_reference(*case))
    ours = served(service, dinov3_query(*case))
    name = f"dinov3 {implementation} {periods} periods head {head} {grid[0]}x{grid[1]} {normalize}"
    measure(name, ours, reference)


def test_dinov3_implementations_are_told_apart() -> None:
    """The cases above can fail: timm is the original in float32 (bitwise), transformers'
    reciprocal is not, nor are bfloat16 periods; at head 80 the exponents differ."""
    torch = lib("torch")
    original = dinov3_original(64, 100, 14, 14, "separate", False)
    assert all(map(torch.equal, original, dinov3_timm(64, 14, 14, "separate")))
    assert not torch.equal(original[0], dinov3_transformers(64, 14, 14)[0])
    assert not torch.equal(original[0], dinov3_original(64, 100, 14, 14, "separate", True)[0])
    wide = dinov3_original(80, 100, 14, 14, "separate", False)
    assert not torch.equal(wide[1], dinov3_transformers(80, 14, 14)[1])


# EVA-02 ---------------------------------------------------------------------------------


def eva02_rope(feat_shape: tuple[int, int]) -> Any:
    """timm's ``create_rope_embed`` with ``eva02_base_patch14_448``'s arguments (eva.py:
    embed 768, 12 heads, rope_type 'cat', in_pixels False, temperature 10000, grid 'ij',
    interleaved, offset 0, ``ref_feat_shape`` (16, 16); ``feat_shape`` 448 / 14 = 32)."""
    return (
        timm_sincos()
        .create_rope_embed(
            rope_type="cat",
            dim=768,
            num_heads=12,
            feat_shape=feat_shape,
            temperature=10000.0,
            grid_indexing="ij",
            rotate_half=False,
            shift_coords=None,
            jitter_coords=None,
            rescale_coords=None,
            in_pixels=False,
            grid_offset=0.0,
            ref_feat_shape=(16, 16),
        )
        .eval()
    )


def eva02_query(grid: tuple[int, int]) -> str:
    return (
        f"model=eva02&grid={grid[0]},{grid[1]}&head_dim=64&theta=10000"
        "&ref_feat_shape=16,16&grid_offset=0"
    )


@pytest.mark.parametrize("grid", [(32, 32), (37, 23)], ids=lambda g: "x".join(map(str, g)))
def test_eva02(service: httpx.Client, grid: tuple[int, int]) -> None:
    """``get_embed()``'s ``[sin | cos]`` (37 x 23: a dynamic size, rescaled to 16 x 16)."""
    sin, cos = eva02_rope(grid).get_embed().chunk(2, -1)
    ours = served(service, eva02_query(grid))
    measure(f"eva02 {grid[0]}x{grid[1]}", ours, rows_of(cos, sin))


def checkpoint_table(model: str) -> tuple[Any, Any]:
    """The module as the checkpoint's config builds it, over its image (Qwen-VL takes any:
    a 448-pixel square in its config's patches)."""
    torch = lib("torch")
    if model in QWEN:
        side = 448 // qwen_rotary(model)[1].patch_size
        return rows_of(*qwen_table(model, (1, side, side)))
    if model == "pixtral":
        config = lib("transformers").PixtralVisionConfig()
        side = config.image_size // config.patch_size
        return rows_of(*pixtral_rotary()(torch.zeros(1), pixtral_ids(side, side)))
    if model == "llama4":
        freqs, _, _ = llama4_freqs("scout")
        return rows_of(
            freqs.real[:, 0].repeat_interleave(2, dim=-1),
            freqs.imag[:, 0].repeat_interleave(2, dim=-1),
        )
    if model == "dinov3":
        return rows_of(*dinov3_transformers(64, 224 // 16, 224 // 16))
    sin, cos = eva02_rope((448 // 14, 448 // 14)).get_embed().chunk(2, -1)
    return rows_of(cos, sin)


@pytest.mark.parametrize(
    "model", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "pixtral", "llama4", "dinov3", "eva02"]
)
def test_model_alone_is_the_checkpoint_s(service: httpx.Client, model: str) -> None:
    """``model=`` and nothing else: the checkpoint's head, theta and image."""
    measure(f"{model} alone", served(service, f"model={model}"), checkpoint_table(model))


# apply ----------------------------------------------------------------------------------


def batch(seed: int, heads: int, length: int, head_dim: int) -> NDArray[np.float32]:
    shape = (2, heads, length, head_dim)
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def qwen_apply(model: str, grid: tuple[int, int, int], x: Any, window: bool = False) -> Any:
    """``apply_rotary_pos_emb_vision``: q (seq, heads, D), one sequence at a time; with
    ``window``, Qwen2.5-VL's tables in the window order (x is in that order)."""
    torch = lib("torch")
    package = lib(f"transformers.models.{QWEN[model][0]}.modeling_{QWEN[model][0]}")
    cos, sin = qwen_table(model, grid)
    if window:
        _, order = qwen_window_order(grid)
        cos, sin = cos[order], sin[order]
    out = [
        package.apply_rotary_pos_emb_vision(q.transpose(0, 1), q.transpose(0, 1), cos, sin)[0]
        for q in x
    ]
    return torch.stack([q.transpose(0, 1) for q in out])


def pixtral_apply(grid: tuple[int, int, int], x: Any) -> Any:
    """``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=0)`` as ``PixtralAttention``
    calls it, q (B, heads, L, D), in float32 (a float32 model's table)."""
    torch = lib("torch")
    package = lib("transformers.models.pixtral.modeling_pixtral")
    cos, sin = pixtral_rotary()(torch.zeros(1), pixtral_ids(grid[1], grid[2]))
    return package.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)[0]


def llama4_apply(grid: tuple[int, int, int], x: Any) -> Any:
    """``vision_apply_rotary_emb``: q (B, L, heads, D), pairs (2i, 2i + 1) complex."""
    package = lib("transformers.models.llama4.modeling_llama4")
    freqs, side, _ = llama4_freqs("scout")
    assert grid == (1, side, side)
    q = x.transpose(1, 2)
    return package.vision_apply_rotary_emb(q, q, freqs)[0].transpose(1, 2)


def eva02_apply(grid: tuple[int, int, int], x: Any) -> Any:
    """``apply_rot_embed_cat(q, rope.get_embed(), half=False)`` (``EvaAttention.forward``
    on the patches after the class token)."""
    module = timm_sincos()
    return module.apply_rot_embed_cat(x, eva02_rope(grid[1:]).get_embed(), half=False)


def dinov3_apply(grid: tuple[int, int, int], x: Any) -> Any:
    """transformers' DINOv3 ``apply_rotary_pos_emb`` (patches only: no prefix tokens)."""
    package = lib("transformers.models.dinov3_vit.modeling_dinov3_vit")
    cos, sin = dinov3_transformers(64, grid[1], grid[2])
    return package.apply_rotary_pos_emb(x, x, cos, sin)[0]


APPLY: Final[list[Any]] = [
    pytest.param(
        qwen_query("qwen2_vl", (1, 4, 6)),
        (1, 4, 6),
        80,
        functools.partial(qwen_apply, "qwen2_vl"),
        id="qwen2_vl",
    ),
    pytest.param(
        qwen_query("qwen2_5_vl", (2, 6, 8)),
        (2, 6, 8),
        80,
        functools.partial(qwen_apply, "qwen2_5_vl"),
        id="qwen2_5_vl",
    ),
    pytest.param(
        qwen_query("qwen2_5_vl", (1, 4, 12), window=True),
        (1, 4, 12),
        80,
        functools.partial(qwen_apply, "qwen2_5_vl", window=True),
        id="qwen2_5_vl-windows",
    ),
    pytest.param(
        qwen_query("qwen3_vl", (1, 8, 10)),
        (1, 8, 10),
        72,
        functools.partial(qwen_apply, "qwen3_vl"),
        id="qwen3_vl",
    ),
    pytest.param(
        "model=pixtral&grid=7,5&head_dim=64&theta=10000", (1, 7, 5), 64, pixtral_apply, id="pixtral"
    ),
    pytest.param(llama4_query(24, 88), (1, 24, 24), 88, llama4_apply, id="llama4"),
    pytest.param(eva02_query((32, 32)), (1, 32, 32), 64, eva02_apply, id="eva02"),
    pytest.param(
        dinov3_query("transformers", "float32", 64, (10, 16), "separate"),
        (1, 10, 16),
        64,
        dinov3_apply,
        id="dinov3-transformers",
    ),
]


@pytest.mark.parametrize(("query", "grid", "head_dim", "reference"), APPLY)
def test_apply(
    service: httpx.Client,
    query: str,
    grid: tuple[int, int, int],
    head_dim: int,
    reference: Callable[[tuple[int, int, int], Any], Any],
) -> None:
    torch = lib("torch")
    tokens = math.prod(grid) + (1 if "llama4" in query else 0)
    x = batch(sum(grid) + head_dim, 3, tokens, head_dim)
    expected = reference(grid, torch.from_numpy(x)).contiguous()
    assert expected.dtype == torch.float32
    ours = applied(service, query, x)
    measure(f"apply {query.split('&')[0].removeprefix('model=')} {grid}", (ours,), (expected,))


# rounding=exact -------------------------------------------------------------------------


def qwen_angles(model: str, head_dim: int) -> Callable[[Any, int, int], list[Any]]:
    """Pair k < D/4 turns by h θ^(-4k/D), pair D/4 + k by w θ^(-4k/D); [h | w | h | w]."""

    def angles(mp: Any, h: int, w: int) -> list[Any]:
        quarter = head_dim // 4
        pairs = [
            mp.mpf(h if k < quarter else w) * mp.power(10000, mp.mpf(-4 * (k % quarter)) / head_dim)
            for k in range(head_dim // 2)
        ]
        return pairs + pairs

    return angles


def pixtral_angles(mp: Any, h: int, w: int) -> list[Any]:
    """Pair k < 16 turns by h θ^(-4k/64), pair 16 + k by w θ^(-(4k + 2)/64)."""
    pairs = [mp.mpf(h) * mp.power(10000, mp.mpf(-4 * k) / 64) for k in range(16)]
    pairs += [mp.mpf(w) * mp.power(10000, mp.mpf(-(4 * k + 2)) / 64) for k in range(16)]
    return pairs + pairs


def llama4_angles(mp: Any, h: int, w: int) -> list[Any]:
    """Pair i < 22 turns by (w + 1) θ^(-2i/44), pair 22 + i by (h + 1) θ^(-2i/44); each
    pair's two columns; the class token (-1, -1) by 0."""
    pairs = [mp.mpf(w + 1) * mp.power(10000, mp.mpf(-2 * i) / 44) for i in range(22)]
    pairs += [mp.mpf(h + 1) * mp.power(10000, mp.mpf(-2 * i) / 44) for i in range(22)]
    return [angle for angle in pairs for _ in range(2)]


def dinov3_angles(grid: tuple[int, int], normalize: str) -> Callable[[Any, int, int], list[Any]]:
    """2π c / 100^(4k/64) with the patch centre c = 2 (i + 1/2) / n - 1 (n: the axis's
    size, or the smaller or larger of the two); [h | w | h | w]."""
    sizes = {"separate": grid, "min": (min(grid),) * 2, "max": (max(grid),) * 2}[normalize]

    def angles(mp: Any, h: int, w: int) -> list[Any]:
        pairs = []
        for index, size in ((h, sizes[0]), (w, sizes[1])):
            centre = 2 * (mp.mpf(index) + mp.mpf(1) / 2) / size - 1
            pairs += [2 * mp.pi * centre / mp.power(100, mp.mpf(4 * k) / 64) for k in range(16)]
        return pairs + pairs

    return angles


def eva02_angles(grid: tuple[int, int]) -> Callable[[Any, int, int], list[Any]]:
    """Pair k < 16 turns by (h / H) 16 θ^(-k/16), pair 16 + k by (w / W) 16 θ^(-k/16);
    each pair's two columns."""

    def angles(mp: Any, h: int, w: int) -> list[Any]:
        pairs = []
        for index, size in ((h, grid[0]), (w, grid[1])):
            position = mp.mpf(index) / size * 16
            pairs += [position * mp.power(10000, mp.mpf(-k) / 16) for k in range(16)]
        return [angle for angle in pairs for _ in range(2)]

    return angles


def row_major(height: int, width: int) -> NDArray[np.int64]:
    h, w = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    return np.stack([h.ravel(), w.ravel()], -1)


EXACT: Final[list[Any]] = [
    pytest.param(
        qwen_query("qwen2_vl", (2, 6, 8)),
        lambda: qwen_ids((2, 6, 8)).numpy(),
        qwen_angles("qwen2_vl", 80),
        id="qwen2_vl",
    ),
    pytest.param(
        qwen_query("qwen2_5_vl", (1, 12, 20), window=True),
        lambda: qwen_ids((1, 12, 20)).numpy()[qwen_window_order((1, 12, 20))[1].numpy()],
        qwen_angles("qwen2_5_vl", 80),
        id="qwen2_5_vl-windows",
    ),
    pytest.param(
        qwen_query("qwen3_vl", (1, 12, 20)),
        lambda: qwen_ids((1, 12, 20)).numpy(),
        qwen_angles("qwen3_vl", 72),
        id="qwen3_vl",
    ),
    pytest.param(
        "model=pixtral&grid=7,5&head_dim=64&theta=10000",
        lambda: row_major(7, 5),
        pixtral_angles,
        id="pixtral",
    ),
    pytest.param(
        llama4_query(24, 88),
        lambda: np.concatenate([row_major(24, 24), [[-1, -1]]]),
        llama4_angles,
        id="llama4",
    ),
    *[
        pytest.param(
            dinov3_query(implementation, "float32", 64, grid, normalize),
            functools.partial(row_major, *grid),
            dinov3_angles(grid, normalize),
            id=f"dinov3-{implementation}-{grid[0]}x{grid[1]}-{normalize}",
        )
        for implementation, grid, normalize in [
            ("original", (14, 14), "separate"),
            ("timm", (10, 16), "min"),
            ("original", (10, 16), "max"),
            ("transformers", (10, 16), "separate"),
        ]
    ],
    pytest.param(
        eva02_query((32, 32)), lambda: row_major(32, 32), eva02_angles((32, 32)), id="eva02"
    ),
    pytest.param(
        eva02_query((37, 23)), lambda: row_major(37, 23), eva02_angles((37, 23)), id="eva02-37x23"
    ),
]


@pytest.mark.parametrize(("query", "coordinates", "angles"), EXACT)
def test_exact_is_50_digit_arithmetic_rounded(
    service: httpx.Client,
    query: str,
    coordinates: Callable[[], NDArray[np.int64]],
    angles: Callable[[Any, int, int], list[Any]],
) -> None:
    """Every entry of a dozen rows within half a float32 ulp of cos and sin, to 50 digits,
    of the model's angle at the row's (h, w) (its token order), in its layout."""
    mpmath = lib("mpmath")
    cos, sin = served(service, f"{query}&rounding=exact&dtype=float32")
    assert cos.dtype == sin.dtype == np.float32
    patches = coordinates()
    assert cos.shape[0] == len(patches)
    rows = sorted({*range(0, len(patches), max(1, len(patches) // 12)), len(patches) - 1})
    largest = 0.0
    with mpmath.workdps(50):
        for row in rows:
            h, w = (int(i) for i in patches[row])
            true_angles = angles(mpmath.mp, h, w)
            assert len(true_angles) == cos.shape[1]
            for column, angle in enumerate(true_angles):
                for ours, true in ((cos, mpmath.cos(angle)), (sin, mpmath.sin(angle))):
                    value = float(ours[row, column])
                    bound = float(np.spacing(np.float32(abs(value)))) / 2
                    error = abs(mpmath.mpf(value) - true)
                    assert error <= bound, (query, row, (h, w), column, value, float(true))
                    largest = max(largest, float(error / bound))
    FIGURES[f"exact {query}"] = {"largest_error_over_bound": largest}


@pytest.mark.parametrize(
    ("model", "grid", "given"),
    [
        pytest.param("qwen2_5_vl", (2, 10, 12), {"window_index": True}, id="qwen2_5_vl-windows"),
        pytest.param("qwen3_vl", (1, 12, 20), {}, id="qwen3_vl"),
        pytest.param("pixtral", (16, 11), {}, id="pixtral"),
        pytest.param("llama4", (24, 24), {}, id="llama4"),
        pytest.param(
            "dinov3",
            (10, 16),
            {"implementation": "original", "periods_dtype": "bfloat16"},
            id="dinov3-original-bfloat16-periods",
        ),
        pytest.param(
            "dinov3",
            (14, 14),
            {"implementation": "transformers", "head_dim": 80},
            id="dinov3-transformers-head-80",
        ),
        pytest.param("eva02", (37, 23), {}, id="eva02"),
    ],
)
@pytest.mark.usefixtures("numpy_engine")
def test_library_without_torch(model: str, grid: tuple[int, ...], given: dict[str, Any]) -> None:
    """The numpy engine: correctly rounded pow, cos and sin in the library's order, within
    the functions' error of torch's (the same table with the torch engine); the share apart
    measured. Angles are at most 25 radians here: an ulp of a frequency moves an entry by
    less than 25 * 2^-24."""
    vision_rotary = lib("service.encodings.vision_rotary")
    kernels = lib("service.encodings.kernels")
    key = vision_rotary.preset_key(model, grid, given, "library", "float32")
    rows = np.arange(key.tokens, dtype=np.int64)
    ours = vision_rotary.take(key, rows)
    kernels.use("torch")
    try:
        theirs = vision_rotary.take(key, rows)
    finally:
        kernels.use("numpy")
    difference = np.abs(ours.astype(np.float64) - theirs)
    apart = int((ours != theirs).sum())
    FIGURES[f"numpy engine {model} {grid} {given}"] = {
        "entries": int(ours.size),
        "bit_for_bit": 1 - apart / ours.size,
        "largest_difference": float(difference.max(initial=0.0)),
    }
    assert difference.max(initial=0.0) <= 25 * 2.0**-24
