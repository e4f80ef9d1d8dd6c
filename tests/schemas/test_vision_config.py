"""A vision tower's rotary embedding read from a model's config.json
(:func:`service.schemas.vision_config.vision_rotary_query`): each model type's record, the
class defaults a config leaves to its class (and their traps), the grid of the image asked
for, and each refusal naming the field or parameter at fault."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pytest

from service.encodings import vision_rotary
from service.errors import InvalidInput, InvalidParameter
from service.schemas import vision_config
from service.schemas.vision_config import TYPES, Holder, Tower, vision_rotary_query

# the vision_config of Qwen2.5-VL-7B-Instruct's config.json (transformers_version 4.53.1)
QWEN25_7B: Final = {
    "depth": 32,
    "hidden_act": "silu",
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_chans": 3,
    "out_hidden_size": 3584,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "spatial_patch_size": 14,
    "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31],
    "tokens_per_second": 2,
    "temporal_patch_size": 2,
}
# Qwen2-VL-7B-Instruct's: its hidden_size is the merger's output, embed_dim the tower's width
QWEN2_7B: Final = {
    "depth": 32,
    "embed_dim": 1280,
    "mlp_ratio": 4,
    "num_heads": 16,
    "in_chans": 3,
    "hidden_size": 3584,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}
# Pixtral-12B's (mistral-community/pixtral-12b: a LlavaConfig)
PIXTRAL_12B: Final = {
    "model_type": "pixtral",
    "hidden_size": 1024,
    "head_dim": 64,
    "image_size": 1024,
    "intermediate_size": 4096,
    "num_attention_heads": 16,
    "num_hidden_layers": 24,
    "patch_size": 16,
    "rope_theta": 10000.0,
}
# Llama-4-Scout-17B-16E's
SCOUT: Final = {
    "model_type": "llama4_vision_model",
    "hidden_size": 1408,
    "image_size": 336,
    "intermediate_size": 5632,
    "num_attention_heads": 16,
    "num_hidden_layers": 34,
    "patch_size": 14,
    "pixel_shuffle_ratio": 0.5,
    "rope_theta": 10000,
    "vision_output_dim": 4096,
}
# DINOv3 ViT-S/16's (facebook/dinov3-vits16-pretrain-lvd1689m)
DINOV3_S16: Final = {
    "model_type": "dinov3_vit",
    "hidden_size": 384,
    "image_size": 224,
    "intermediate_size": 1536,
    "num_attention_heads": 6,
    "num_hidden_layers": 12,
    "num_register_tokens": 4,
    "patch_size": 16,
    "rope_theta": 100.0,
}
IMAGE: Final = {"height": 448, "width": 644}


def read(config: dict[str, Any], asked: Mapping[str, Any] = IMAGE) -> dict[str, Any]:
    got = vision_rotary_query(config, asked)
    assert got.layers is None
    assert set(got.tables) == {""}
    return got.tables[""]


def fields(config: dict[str, Any], asked: Mapping[str, Any] = IMAGE) -> tuple[str, ...]:
    return vision_rotary_query(config, asked).fields


def refused(config: dict[str, Any], asked: Mapping[str, Any] = IMAGE) -> InvalidParameter:
    with pytest.raises(InvalidParameter) as caught:
        vision_rotary_query(config, asked)
    return caught.value


@pytest.mark.parametrize(
    ("config", "asked", "expected"),
    [
        pytest.param(
            {"model_type": "qwen2_5_vl", "vision_config": QWEN25_7B},
            IMAGE,
            {"model": "qwen2_5_vl", "grid": "1,32,46", "head_dim": 80, "theta": 10000.0}
            | {"spatial_merge_size": 2, "window_size": 112, "patch_size": 14},
            id="qwen2_5_vl-7b",
        ),
        pytest.param(
            {"model_type": "qwen2_vl", "vision_config": {**QWEN2_7B, "model_type": "qwen2_vl"}},
            {"height": 28, "width": 56, "frames": 3},
            {"model": "qwen2_vl", "grid": "2,2,4", "head_dim": 80, "theta": 10000.0}
            | {"spatial_merge_size": 2},
            id="qwen2_vl-7b-video",
        ),
        pytest.param(
            {"model_type": "qwen3_vl", "vision_config": {"rope_theta": 5000}},
            {"height": 64, "width": 32},
            {"model": "qwen3_vl", "grid": "1,4,2", "head_dim": 72, "theta": 5000.0}
            | {"spatial_merge_size": 2},
            id="qwen3_vl-defaults",
        ),
        pytest.param(
            {"model_type": "qwen3_vl_moe", "vision_config": {"hidden_size": 1024}},
            {"height": 64, "width": 64, "frames": 2},
            {"model": "qwen3_vl", "grid": "1,4,4", "head_dim": 64, "theta": 10000.0}
            | {"spatial_merge_size": 2},
            id="qwen3_vl_moe",
        ),
        pytest.param(
            {"model_type": "llava", "vision_config": PIXTRAL_12B},
            {"height": 1024, "width": 500},
            {"model": "pixtral", "grid": "64,31", "head_dim": 64, "theta": 10000.0},
            id="pixtral-12b-llava",
        ),
        pytest.param(
            PIXTRAL_12B,
            {"height": 16, "width": 16, "frames": 1},
            {"model": "pixtral", "grid": "1,1", "head_dim": 64, "theta": 10000.0},
            id="pixtral-vision-config",
        ),
        pytest.param(
            {"model_type": "mistral3"},
            {"height": 1540, "width": 700},
            {"model": "pixtral", "grid": "110,50", "head_dim": 64, "theta": 10000.0},
            id="mistral3-no-vision-config",
        ),
        pytest.param(
            {"model_type": "llama4", "vision_config": SCOUT},
            {},
            {"model": "llama4", "grid": "24,24", "head_dim": 88, "theta": 10000.0},
            id="llama4-scout",
        ),
        pytest.param(
            SCOUT,
            {"height": 336, "width": 336},
            {"model": "llama4", "grid": "24,24", "head_dim": 88, "theta": 10000.0},
            id="llama4-vision-config-its-tile",
        ),
        pytest.param(
            DINOV3_S16,
            {"height": 224, "width": 200},
            {"model": "dinov3", "grid": "14,12", "head_dim": 64, "theta": 100.0},
            id="dinov3-vits16",
        ),
        pytest.param(
            {**QWEN25_7B, "model_type": "qwen2_5_vl_vision"},
            {"height": 56, "width": 56},
            {"model": "qwen2_5_vl", "grid": "1,4,4", "head_dim": 80, "theta": 10000.0}
            | {"spatial_merge_size": 2, "window_size": 112, "patch_size": 14},
            id="qwen2_5_vl-vision-config",
        ),
    ],
)
def test_each_model_type_gives_the_get_s_parameters(
    config: dict[str, Any], asked: Mapping[str, Any], expected: dict[str, Any]
) -> None:
    assert read(config, asked) == expected


def test_a_config_s_fields_read_are_said_with_each_default_taken() -> None:
    """What the config gives is named; what its class gave, with the value."""
    said = fields({"model_type": "qwen2_5_vl", "vision_config": QWEN25_7B})
    assert said == (
        "model_type",
        "vision_config.hidden_size",
        "vision_config.num_heads",
        "vision_config.rope_theta=10000.0",
        "vision_config.patch_size",
        "vision_config.spatial_merge_size",
        "vision_config.temporal_patch_size",
        "vision_config.window_size",
    )


def test_qwen2_5_vl_s_class_default_is_not_the_7b_s() -> None:
    """Qwen2_5_VLVisionConfig is 3584 wide: a config that leaves hidden_size out gets heads
    of 224, as transformers builds them, and says it took the default."""
    config: dict[str, Any] = {"model_type": "qwen2_5_vl", "vision_config": {"num_heads": 16}}
    assert read(config)["head_dim"] == 224
    assert "vision_config.hidden_size=3584" in fields(config)
    assert read({"model_type": "qwen2_5_vl"})["head_dim"] == 224


def test_qwen2_vl_s_head_is_embed_dim_s() -> None:
    """Qwen2-VL's hidden_size is its merger's output: the head is embed_dim's."""
    assert read({"model_type": "qwen2_vl", "vision_config": {"embed_dim": 640}})["head_dim"] == 40
    config = {"model_type": "qwen2_vl", "vision_config": {"hidden_size": 640}}
    assert read(config)["head_dim"] == 80
    assert "vision_config.embed_dim=1280" in fields(config)


def test_llama4_s_class_defaults_are_not_scout_s() -> None:
    """Llama4VisionConfig is 768 wide at 448 pixels: 32x32 patches of 48, not 24x24 of 88."""
    config = {"model_type": "llama4", "vision_config": {}}
    assert read(config, {}) == {"model": "llama4", "grid": "32,32", "head_dim": 48, "theta": 1e4}
    assert "vision_config.image_size=448" in fields(config, {})


def test_dinov3_reads_its_own_rope_theta_only() -> None:
    """DINOv3ViTRopePositionEmbedding reads config.rope_theta (default 100.0), whatever
    rope_parameters say; the registers are not in the table."""
    config = {"model_type": "dinov3_vit", "rope_parameters": {"rope_theta": 50.0}}
    assert read(config)["theta"] == 100.0
    assert "rope_theta=100.0" in fields(config)
    assert read({**DINOV3_S16, "num_register_tokens": 0}) == read(DINOV3_S16)


def test_mistral3_s_init_kwargs_are_for_a_missing_vision_config_only() -> None:
    """SubConfigSpec.create_subconfig gives a vision_config dict its class's defaults: the
    spec's init_kwargs (patch 14) only where there is none."""
    assert "vision_config.patch_size=14" in fields({"model_type": "mistral3"})
    given = {"model_type": "mistral3", "vision_config": {"hidden_size": 512}}
    assert read(given, {"height": 64, "width": 32}) == {
        "model": "pixtral",
        "grid": "4,2",
        "head_dim": 32,
        "theta": 10000.0,
    }


@pytest.mark.parametrize(
    ("rope", "theta"),
    [
        pytest.param({"rope_parameters": {"rope_theta": 7.0}, "rope_theta": 500}, 7.0, id="params"),
        pytest.param({"rope_theta": 500}, 500.0, id="legacy"),
        pytest.param({"rope_scaling": {"rope_type": "axial", "rope_theta": 3}}, 3.0, id="scaling"),
        pytest.param({"rope_parameters": {"rope_type": "default"}}, 1e4, id="default-type"),
    ],
)
def test_theta_as_the_rope_mixin_standardizes_it(rope: dict[str, Any], theta: float) -> None:
    assert read({**PIXTRAL_12B, **rope}, {"height": 16, "width": 16})["theta"] == theta


@pytest.mark.parametrize(
    ("frames", "temporal"), [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3)], ids=lambda v: str(v)
)
def test_a_video_s_frames_fill_temporal_patches(frames: int, temporal: int) -> None:
    """The processor repeats the last frame to fill the last temporal patch."""
    config = {"model_type": "qwen2_vl", "vision_config": QWEN2_7B}
    grid = read(config, {**IMAGE, "frames": frames})["grid"]
    assert grid == f"{temporal},32,46"


@pytest.mark.parametrize(
    ("config", "asked", "name", "words"),
    [
        pytest.param({}, IMAGE, "model_type", "is missing", id="no-model-type"),
        pytest.param({"model_type": "eva02"}, IMAGE, "model_type", "built by function", id="eva02"),
        pytest.param(
            {"model_type": 7}, IMAGE, "model_type", "must be a string", id="model-type-number"
        ),
        pytest.param(
            {"model_type": "llava"}, IMAGE, "vision_config", "clip_vision_model", id="llava-clip"
        ),
        pytest.param(
            {"model_type": "llava", "vision_config": {"model_type": "siglip_vision_model"}},
            IMAGE,
            "vision_config.model_type",
            "no rotary embedding",
            id="llava-siglip",
        ),
        pytest.param(
            {"model_type": "qwen2_vl", "vision_config": [1]},
            IMAGE,
            "vision_config",
            "must be an object",
            id="vision-config-list",
        ),
        pytest.param(
            {"model_type": "qwen2_5_vl", "vision_config": {"hidden_size": None}},
            IMAGE,
            "vision_config.hidden_size",
            "is null",
            id="null-width",
        ),
        pytest.param(
            {"model_type": "qwen2_5_vl", "vision_config": {"num_heads": 0}},
            IMAGE,
            "vision_config.num_heads",
            "positive integer",
            id="no-heads",
        ),
        pytest.param(
            {"model_type": "qwen2_5_vl", "vision_config": {"num_heads": 16.0}},
            IMAGE,
            "vision_config.num_heads",
            "must be an integer",
            id="heads-float",
        ),
        pytest.param(
            {"model_type": "qwen2_5_vl", "vision_config": {"patch_size": [14, 14]}},
            IMAGE,
            "vision_config.patch_size",
            "must be an integer",
            id="patch-list",
        ),
        pytest.param(
            {"model_type": "qwen2_5_vl", "vision_config": {"hidden_size": 8, "num_heads": 16}},
            IMAGE,
            "vision_config.hidden_size",
            "narrower than the heads",
            id="narrower-than-heads",
        ),
        pytest.param(
            {**PIXTRAL_12B, "head_dim": 128},
            IMAGE,
            "head_dim",
            "would not fit them",
            id="pixtral-head-dim-not-its-heads",
        ),
        pytest.param(
            {"model_type": "qwen3_vl", "vision_config": {"head_dim": 64}},
            {"height": 64, "width": 64},
            "vision_config.head_dim",
            "= 72 wide",
            id="qwen3-head-dim-not-its-heads",
        ),
        pytest.param(
            {**PIXTRAL_12B, "rope_parameters": {"rope_type": "linear", "factor": 2.0}},
            IMAGE,
            "rope_parameters.rope_type",
            "only axial",
            id="pixtral-scaled",
        ),
        pytest.param(
            {**PIXTRAL_12B, "rope_parameters": {"rope_theta": -1}},
            IMAGE,
            "rope_parameters.rope_theta",
            "positive number",
            id="pixtral-theta",
        ),
        pytest.param(
            {**DINOV3_S16, "rope_theta": 0},
            IMAGE,
            "rope_theta",
            "positive number",
            id="dinov3-theta",
        ),
        pytest.param(
            {**SCOUT, "image_size": 10},
            {},
            "image_size",
            "smaller than a patch",
            id="llama4-tile-smaller-than-a-patch",
        ),
    ],
)
def test_a_config_s_fault_is_refused_naming_its_field(
    config: dict[str, Any], asked: Mapping[str, Any], name: str, words: str
) -> None:
    problem = refused(config, asked)
    assert isinstance(problem, InvalidInput)
    assert problem.name == name
    assert words in str(problem)


@pytest.mark.parametrize(
    ("config", "asked", "names", "words"),
    [
        pytest.param(
            {"model_type": "qwen2_5_vl", "vision_config": QWEN25_7B},
            {"height": 42, "width": 644},
            ["height"],
            "not a multiple of patch_size × spatial_merge_size (14 × 2)",
            id="qwen-height-odd-patches",
        ),
        pytest.param(
            {"model_type": "qwen2_vl", "vision_config": QWEN2_7B},
            {"height": 448, "width": 30},
            ["width"],
            "is 30 pixels",
            id="qwen-width-part-of-a-patch",
        ),
        pytest.param(
            {"model_type": "qwen2_vl"}, {"width": 56}, ["height"], "in pixels", id="no-height"
        ),
        pytest.param(PIXTRAL_12B, {"height": 16}, ["width"], "in pixels", id="no-width"),
        pytest.param(
            PIXTRAL_12B,
            {"height": 15, "width": 64},
            ["height", "width"],
            "empty grid (0, 4)",
            id="pixtral-smaller-than-a-patch",
        ),
        pytest.param(
            DINOV3_S16, {**IMAGE, "frames": 2}, ["frames"], "one frame", id="dinov3-video"
        ),
        pytest.param(
            {"model_type": "llama4", "vision_config": SCOUT},
            {"height": 336, "width": 672},
            ["width"],
            "every 336×336 tile",
            id="llama4-not-its-tile",
        ),
        pytest.param(SCOUT, {"frames": 8}, ["frames"], "one frame", id="llama4-video"),
    ],
)
def test_an_image_the_model_cannot_take_is_refused_naming_the_parameter(
    config: dict[str, Any], asked: Mapping[str, Any], names: list[str], words: str
) -> None:
    problem = refused(config, asked)
    assert not isinstance(problem, InvalidInput)  # the request's, not the config's
    assert [each["name"] for each in problem.extensions["errors"]] == names
    assert words in str(problem)


def test_every_model_s_config_reads_a_tower_of_the_table() -> None:
    """Each holder names a tower record (LLaVA's default, CLIP, has no rotary); each tower
    is a model of the GET that takes what it reads, and reads its width and heads under its
    class's names, with a default for each."""
    for name, record in TYPES.items():
        if isinstance(record, Holder):
            assert isinstance(TYPES.get(record.tower), Tower) or name == "llava", name
            continue
        takes = vision_rotary.PRESETS[record.model].takes
        assert {"head_dim", "theta", *record.reads} <= set(takes), name
        defaults, names = record.config.defaults, record.config.names
        for field in (record.width, "num_attention_heads", "patch_size", *record.reads):
            assert names.get(field, field) in defaults, (name, field)
    assert vision_config.SIZE == ("height", "width", "frames")
