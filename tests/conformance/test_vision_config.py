"""Conformance: a vision tower's rotary embedding read from a model's config.json
(:func:`service.schemas.vision_config.vision_rotary_query`) against transformers 5.23.0's own
config classes and modules, built from the same config (``from_dict``, through
``CONFIG_MAPPING`` by its ``model_type``, as ``AutoConfig`` does), no weights:

- the parameters read make the module's table: a config of the same class one head
  ``head_dim`` wide, with theta as read (and Llama 4's grid as its image and a patch of 1),
  builds the same ``inv_freq`` (Llama 4: ``freqs_ci``) bit for bit as the module of the
  posted config (``Qwen2VLVisionRotaryEmbedding``, ``Qwen2_5_VLVisionRotaryEmbedding``,
  ``Qwen3VLVisionRotaryEmbedding``, ``Qwen3VLMoeVisionRotaryEmbedding``,
  ``PixtralVisionRotaryEmbedding``, ``Llama4VisionRotaryEmbedding``,
  ``DINOv3ViTRopePositionEmbedding``);
- ``head_dim`` is the width of the heads of the tower's attention (built on the meta device);
  the merge and window sizes are the config's;
- the grid is the model's: Qwen2-VL's image processor's ``image_grid_thw``
  (``Qwen2VLImageProcessorPil``; sizes it would resize are the ones refused), the tokens of
  a one-layer ``PixtralVisionModel`` and of DINOv3's rotary module over pixels of that size,
  Llama 4's table's rows;
- each record's defaults are its class's (``cls()``), and each model's config's vision
  class and ``init_kwargs`` (Mistral 3's) are the record's;
- ``POST /v1/encodings/vision-rotary/from-config`` of each config serves the module's own
  cos and sin bit for bit (the torch engine), at the ids its model makes
  (``get_vision_position_ids`` for Qwen-VL, ``PixtralVisionModel.forward``'s meshgrid,
  Llama 4's ``freqs_ci`` each pair's value twice, DINOv3's module over pixels of that
  size); the share of entries bit for bit and the largest difference are written to
  ``artifacts/conformance-vision-config.json``.

Needs the conformance extra."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, Final

import httpx
import numpy as np
import pytest

from service.errors import InvalidParameter
from service.schemas.vision_config import TYPES, Holder, Tower, vision_rotary_query
from tests.schemas.test_vision_config import (
    DINOV3_S16,
    PIXTRAL_12B,
    QWEN2_7B,
    QWEN25_7B,
    SCOUT,
)
from tests.support import ROOT

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

_missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
if _missing and not os.environ.get("CONFORMANCE_REQUIRED"):
    pytest.skip(
        f"the conformance extra is not installed (no {', '.join(_missing)})",
        allow_module_level=True,
    )


ARTIFACT: Final = ROOT / "artifacts" / "conformance-vision-config.json"
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
        print("\n\nConformance, vision-rotary from-config:\n" + json.dumps(FIGURES, indent=1))


def classes() -> Mapping[str, Any]:
    return lib("transformers.models.auto.configuration_auto").CONFIG_MAPPING  # type: ignore[no-any-return]


IMAGE: Final = {"height": 448, "width": 644}
# (posted config, the image asked for)
CASES: Final[dict[str, tuple[dict[str, Any], dict[str, Any]]]] = {
    "qwen2_vl-7b": ({"model_type": "qwen2_vl", "vision_config": QWEN2_7B}, IMAGE),
    "qwen2_vl-defaults": ({"model_type": "qwen2_vl"}, {"height": 56, "width": 112}),
    "qwen2_vl-old-vision-model-type": (
        {"model_type": "qwen2_vl", "vision_config": {"model_type": "qwen2_vl", "embed_dim": 640}},
        IMAGE,
    ),
    "qwen2_5_vl-7b": ({"model_type": "qwen2_5_vl", "vision_config": QWEN25_7B}, IMAGE),
    "qwen2_5_vl-7b-windows": (
        {"model_type": "qwen2_5_vl", "vision_config": QWEN25_7B},
        {"height": 336, "width": 644, "window_index": True},
    ),
    "qwen2_5_vl-defaults-head-224": ({"model_type": "qwen2_5_vl"}, IMAGE),
    "qwen2_5_vl-vision-legacy-theta": (
        {**QWEN25_7B, "model_type": "qwen2_5_vl_vision", "rope_theta": 500.0},
        {"height": 28, "width": 28},
    ),
    "qwen3_vl-defaults": ({"model_type": "qwen3_vl"}, {"height": 64, "width": 96}),
    "qwen3_vl-theta": (
        {
            "model_type": "qwen3_vl",
            "vision_config": {"hidden_size": 1024, "rope_parameters": {"rope_theta": 5000.0}},
        },
        {"height": 640, "width": 480},
    ),
    "qwen3_vl_moe-defaults": ({"model_type": "qwen3_vl_moe"}, {"height": 32, "width": 64}),
    "pixtral-12b-llava": (
        {"model_type": "llava", "vision_config": PIXTRAL_12B},
        {"height": 1000, "width": 517},
    ),
    "pixtral-defaults": ({"model_type": "pixtral"}, {"height": 64, "width": 48}),
    "mistral3-no-vision-config": ({"model_type": "mistral3"}, {"height": 308, "width": 140}),
    "mistral3-vision-config": (
        {"model_type": "mistral3", "vision_config": {"hidden_size": 512, "rope_theta": 1e6}},
        {"height": 64, "width": 40},
    ),
    "llama4-scout": ({"model_type": "llama4", "vision_config": SCOUT}, {}),
    "llama4-defaults": ({"model_type": "llama4"}, {}),
    "llama4-vision-config": (SCOUT, {"height": 336}),
    "dinov3-vits16": (DINOV3_S16, {"height": 224, "width": 200}),
    "dinov3-defaults-theta": ({"model_type": "dinov3_vit", "rope_theta": 37.5}, IMAGE),
}
# each model's attention, whose heads the table turns
ATTENTION: Final = {
    "Qwen2VLVisionConfig": ("qwen2_vl", "VisionAttention"),
    "Qwen2_5_VLVisionConfig": ("qwen2_5_vl", "Qwen2_5_VLVisionAttention"),
    "Qwen3VLVisionConfig": ("qwen3_vl", "Qwen3VLVisionAttention"),
    "Qwen3VLMoeVisionConfig": ("qwen3_vl_moe", "Qwen3VLMoeVisionAttention"),
    "PixtralVisionConfig": ("pixtral", "PixtralAttention"),
    "Llama4VisionConfig": ("llama4", "Llama4VisionAttention"),
    "DINOv3ViTConfig": ("dinov3_vit", "DINOv3ViTAttention"),
}


def vision_of(posted: dict[str, Any]) -> Any:
    """The vision config transformers builds from ``posted``."""
    config = classes()[posted["model_type"]].from_dict(posted)
    return getattr(config, "vision_config", None) or config


def tower_of(name: str) -> Tower:
    tower = TYPES[name]
    assert isinstance(tower, Tower)
    return tower


def rotary_of(tower: Tower, config: Any) -> Any:
    """The record's rotary module (``models/x/modeling_x.py, Class``) built from ``config``."""
    path, name = tower.rotary.split(", ")
    module = lib("transformers." + path.removesuffix(".py").replace("/", "."))
    return getattr(module, name)(config).eval()  # DINOv3's augments its positions in training


def table_of(rotary: Any) -> Any:
    """The module's frequencies: the table all its angles are multiples of."""
    return rotary.freqs_ci if hasattr(rotary, "freqs_ci") else rotary.inv_freq


def rebuilt(vision: Any, query: dict[str, Any]) -> Any:
    """A config of ``vision``'s class from the parameters read alone: one head
    ``head_dim`` wide, theta as read (Llama 4: its grid as the image, a patch of 1)."""
    head, theta = query["head_dim"], query["theta"]
    kind = type(vision).__name__
    if kind == "DINOv3ViTConfig":
        return type(vision)(hidden_size=head, num_attention_heads=1, rope_theta=theta)
    rope = {"rope_theta": theta}
    if kind == "Qwen2VLVisionConfig":
        return type(vision)(embed_dim=head, num_heads=1, rope_parameters=rope)
    if kind == "Llama4VisionConfig":
        side = int(query["grid"].split(",")[0])
        return type(vision)(
            hidden_size=head,
            num_attention_heads=1,
            image_size=side,
            patch_size=1,
            rope_parameters=rope,
        )
    return type(vision)(hidden_size=head, num_attention_heads=1, rope_parameters=rope)


def grid_of(vision: Any, model: str, asked: dict[str, Any]) -> tuple[int, ...]:
    """The grid in patches the model makes of an image of the asked size."""
    torch = lib("torch")
    height, width = int(asked.get("height") or 0), int(asked.get("width") or 0)
    if model.startswith("qwen"):
        processor = lib("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
        images = processor.Qwen2VLImageProcessorPil(
            patch_size=vision.patch_size,
            merge_size=vision.spatial_merge_size,
            temporal_patch_size=vision.temporal_patch_size,
            min_pixels=1,
            max_pixels=1 << 30,
        )
        pixels = np.zeros((height, width, 3), np.uint8)
        return tuple(images(images=[pixels], return_tensors="pt")["image_grid_thw"][0].tolist())
    if model == "pixtral":
        pixtral = lib("transformers.models.pixtral.modeling_pixtral")
        small = type(vision)(
            hidden_size=32,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=1,
            patch_size=vision.patch_size,
            image_size=max(height, width),
        )
        tower = pixtral.PixtralVisionModel(small).eval()
        with torch.no_grad():
            out = tower(torch.zeros(1, 3, height, width), image_sizes=[(height, width)])
        tokens = out.last_hidden_state.shape[1]
        patch = vision.patch_size
        assert tokens == (height // patch) * (width // patch)
        return height // patch, width // patch
    if model == "dinov3":
        cos, _ = rotary_of(tower_of("dinov3_vit"), vision)(torch.zeros(1, 3, height, width))
        patch = vision.patch_size
        assert cos.shape[0] == (height // patch) * (width // patch)
        return height // patch, width // patch
    side = vision.image_size // vision.patch_size  # llama4: its table's rows, and the class token
    freqs_ci = rotary_of(tower_of("llama4_vision_model"), vision).freqs_ci
    assert freqs_ci.shape[:2] == (side * side + 1, 1)
    return side, side


@pytest.mark.parametrize("name", list(CASES))
def test_the_parameters_read_make_the_module_s_table(name: str) -> None:
    torch = lib("torch")
    posted, asked = CASES[name]
    query = vision_rotary_query(posted, asked).tables[""]
    vision = vision_of(posted)
    tower = tower_of(vision.model_type)
    assert query["model"] == tower.model
    theirs = table_of(rotary_of(tower, vision))
    ours = table_of(rotary_of(tower, rebuilt(vision, query)))
    assert ours.dtype == theirs.dtype
    assert torch.equal(ours, theirs), name
    file, attention = ATTENTION[type(vision).__name__]
    with torch.device("meta"):
        heads = getattr(lib(f"transformers.models.{file}.modeling_{file}"), attention)(vision)
    assert heads.head_dim == query["head_dim"]
    for parameter in tower.reads:
        assert query[parameter] == getattr(vision, parameter)
    grid = tuple(map(int, query["grid"].split(",")))
    assert grid == grid_of(vision, query["model"], asked)


def test_qwen_vl_refuses_the_sizes_its_processor_would_resize() -> None:
    """A height that is not a multiple of patch_size × spatial_merge_size is never what the
    model gets: Qwen2-VL's processor resizes it (smart_resize) first."""
    posted = {"model_type": "qwen2_5_vl", "vision_config": QWEN25_7B}
    vision = vision_of(posted)
    for height in (42, 30, 434):
        asked = {"height": height, "width": 644}
        with pytest.raises(InvalidParameter) as caught:
            vision_rotary_query(posted, asked)
        assert caught.value.name == "height"
        resized = grid_of(vision, "qwen2_5_vl", asked)[1] * vision.patch_size
        assert resized != height, height


@pytest.mark.parametrize("name", [name for name, kind in TYPES.items() if isinstance(kind, Tower)])
def test_a_tower_s_defaults_are_its_class_s(name: str) -> None:
    tower = tower_of(name)
    default = classes()[name]()
    assert type(default).__name__ == tower.config.source.split(", ")[1]
    for field, value in tower.config.defaults.items():
        assert getattr(default, field) == value, (name, field)
    for common, own in tower.config.names.items():
        assert default.attribute_map[common] == own


@pytest.mark.parametrize("name", [name for name, kind in TYPES.items() if isinstance(kind, Holder)])
def test_a_model_s_vision_class_and_init_kwargs_are_its_record_s(name: str) -> None:
    holder = TYPES[name]
    assert isinstance(holder, Holder)
    config = classes()[name]()
    assert type(config).__name__ == holder.source.split(", ")[1]
    assert config.vision_config.model_type == holder.tower
    for field, value in holder.absent.items():
        assert getattr(config.vision_config, field) == value, (name, field)
    tower = TYPES.get(holder.tower)
    if isinstance(tower, Tower):  # a vision_config given gets the class's defaults only
        given = classes()[name].from_dict({"vision_config": {}}).vision_config
        for field, value in tower.config.defaults.items():
            assert getattr(given, field) == value, (name, field)


def module_table(tower: Tower, vision: Any, query: dict[str, Any], asked: dict[str, Any]) -> Any:
    """The module's cos and sin of every token, in its model's order and the served layout."""
    torch = lib("torch")
    rotary = rotary_of(tower, vision)
    grid = list(map(int, query["grid"].split(",")))
    if query["model"].startswith("qwen"):
        vision_utils = lib("transformers.vision_utils")
        merge = query["spatial_merge_size"]
        ids = vision_utils.get_vision_position_ids(torch.tensor([grid]), merge)
        cos, sin = rotary(torch.zeros(1), ids)
        if not asked.get("window_index"):
            return cos, sin
        # as Qwen2_5_VisionTransformerPretrainedModel.forward: blocks of merge² rows taken
        # in the windows' order
        order, _ = vision_utils.get_vision_window_index(
            torch.tensor([grid]), merge, query["window_size"], query["patch_size"]
        )
        return tuple(part.reshape(len(order), -1)[order].reshape(part.shape) for part in (cos, sin))
    if query["model"] == "pixtral":  # PixtralVisionModel.forward's ids of one image
        rows, columns = torch.meshgrid(torch.arange(grid[0]), torch.arange(grid[1]), indexing="ij")
        return rotary(torch.zeros(1), torch.stack([rows.flatten(), columns.flatten()], dim=-1))
    if query["model"] == "llama4":  # complex pair i is columns (2i, 2i + 1)
        pairs = rotary.freqs_ci[:, 0, :]
        return pairs.real.repeat_interleave(2, -1), pairs.imag.repeat_interleave(2, -1)
    return rotary(torch.zeros(1, 3, asked["height"], asked["width"]))


@pytest.mark.parametrize("name", list(CASES))
def test_from_config_serves_the_module_s_table(service: httpx.Client, name: str) -> None:
    posted, asked = CASES[name]
    query = vision_rotary_query(posted, asked).tables[""]
    vision = vision_of(posted)
    answer = service.post(
        "/v1/encodings/vision-rotary/from-config", params={**asked, "format": "npz"}, json=posted
    )
    assert answer.status_code == 200, answer.text
    with np.load(io.BytesIO(answer.content), allow_pickle=False) as archive:
        ours = np.concatenate([archive["cos"], archive["sin"]])
    theirs = np.concatenate(
        [part.numpy() for part in module_table(tower_of(vision.model_type), vision, query, asked)]
    )
    assert ours.dtype == theirs.dtype == np.float32
    assert ours.shape == theirs.shape
    difference = np.abs(ours.astype(np.float64) - theirs)
    FIGURES[name] = {
        "entries": int(ours.size),
        "bit_for_bit": float((ours.view(np.int32) == theirs.view(np.int32)).mean()),
        "largest_difference": float(difference.max(initial=0.0)),
    }
    np.testing.assert_array_equal(ours.view(np.int32), theirs.view(np.int32))
