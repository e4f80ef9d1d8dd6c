"""The model-type table (:mod:`service.schemas.hf_models`) and the field types the readers
declare (:func:`service.schemas.hf_config.fields`): what differs by model type is read from
its record alone, and a reader of another kind of config is one more record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from service.errors import InvalidInput
from service.schemas import (
    hf_config,
    hf_layers,
    hf_models,
    hf_rope,
    llama4,
    mrope_layout,
    rope_nd,
    sincos,
    timestep,
    vision_config,
)
from service.schemas.hf_config import INTEGER, NUMBER, NUMBERS, Reader
from service.schemas.hf_models import ModelType


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Field types declared by a test stay the test's."""
    monkeypatch.setattr(hf_config, "_TYPES", dict(hf_config._TYPES))


def test_every_field_type_is_a_readers_declaration() -> None:
    """The types a config's fields are checked against are the union of the readers'."""
    union = {**hf_rope.FIELDS, **hf_layers.FIELDS, **llama4.FIELDS, **timestep.FIELDS}
    union |= {**sincos.FIELDS, **rope_nd.FIELDS, **vision_config.FIELDS}
    assert union == hf_config._TYPES
    assert hf_config._TYPES["no_rope_layers"] is NUMBERS
    assert hf_config._TYPES["num_hidden_layers"] is INTEGER


@pytest.mark.usefixtures("declared")
def test_a_field_declared_with_two_types_is_refused() -> None:
    """One name holds one type whichever reader reads it."""
    hf_config.fields({"num_hidden_layers": INTEGER})  # the same again: fine
    with pytest.raises(ValueError, match="num_hidden_layers is declared an integer and a number"):
        hf_config.fields({"num_hidden_layers": NUMBER})


def test_the_mrope_model_types_are_the_tables() -> None:
    """M-RoPE's position arithmetic by model type is read from the records."""
    positions = {name: model.positions for name, model in hf_models.MODELS.items()}
    assert {k: v for k, v in positions.items() if v is not None} == mrope_layout.MODEL_TYPES
    assert mrope_layout.MODEL_TYPES["glm4v"] == "qwen3_vl"


def test_a_model_types_layers_come_from_its_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new model type's pattern, last layer and wider heads are one record: no code."""
    toy = ModelType("a toy", pattern=2, last_layer="full_attention", global_head_dim=32)
    monkeypatch.setattr(hf_models, "MODELS", {**hf_models.MODELS, "toy": toy})
    config = {
        "model_type": "toy",
        "head_dim": 8,
        "num_hidden_layers": 5,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default"},
            "full_attention": {"rope_type": "default"},
        },
    }
    read = hf_layers.rotary_query(config, {})
    assert read.layers == ["sliding_attention", "full_attention"] * 2 + ["full_attention"]
    assert read.tables["full_attention"]["head_dim"] == 32
    assert read.tables["sliding_attention"]["head_dim"] == 8
    # the same config of no known type has no pattern: its layers are not known
    assert hf_layers.rotary_query({**config, "model_type": "other"}, {}).layers is None


def test_a_model_types_layers_without_rope_come_from_its_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    toy = ModelType("a toy", nope_interval=2)
    monkeypatch.setattr(hf_models, "MODELS", {**hf_models.MODELS, "toy": toy})
    read = llama4.temperature_query({"model_type": "toy", "num_hidden_layers": 4}, {})
    assert read.layers == ["rope", "nope", "rope", "nope"]


# A diffusers config.json (a FLUX transformer's) has no model_type: its class names it, and its
# fields are its own; a vision tower's are in vision_config. Each reader is one more record.
FLUX = ModelType(
    "diffusers, FluxTransformer2DModel",
    defaults={"theta": 10000},
    names={"axes_dims": "axes_dims_rope"},
)
SIGLIP = ModelType("models/siglip/configuration_siglip.py", defaults={"patch_size": 14})
TOYS: Mapping[str, ModelType] = {"FluxTransformer2DModel": FLUX, "siglip_vision_model": SIGLIP}


def toy_reader(config: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A reader of a diffusion transformer's or a vision tower's rope: its record by the
    config's class (``_class_name``) or its vision tower's ``model_type``."""
    hf_config.fields({"axes_dims": NUMBERS, "theta": NUMBER, "patch_size": INTEGER})
    top = Reader(config)
    vision = top.object("vision_config")
    kind = config.get("_class_name") if vision is None else vision.values.get("model_type")
    reader = (vision or top).of_class(TOYS.get(kind) if isinstance(kind, str) else None)
    if vision is not None:
        return {"patch_size": reader.get("patch_size")}, tuple(reader.read)
    return {"axes": reader.get("axes_dims"), "base": reader.get("theta")}, tuple(reader.read)


@pytest.mark.usefixtures("declared")
def test_a_reader_of_a_diffusers_config_is_one_more_record() -> None:
    config = {"_class_name": "FluxTransformer2DModel", "axes_dims_rope": [16, 56, 56]}
    assert toy_reader(config) == (
        {"axes": [16, 56, 56], "base": 10000},
        ("axes_dims_rope", "theta=10000"),
    )
    with pytest.raises(InvalidInput, match="must be a list of numbers"):
        toy_reader({**config, "axes_dims_rope": "16,56,56"})


@pytest.mark.usefixtures("declared")
def test_a_reader_of_a_vision_config_is_one_more_record() -> None:
    config = {"model_type": "llava", "vision_config": {"model_type": "siglip_vision_model"}}
    assert toy_reader(config) == ({"patch_size": 14}, ("vision_config.patch_size=14",))
    given = {**config, "vision_config": {"model_type": "siglip_vision_model", "patch_size": 16}}
    assert toy_reader(given) == ({"patch_size": 16}, ("vision_config.patch_size",))
    with pytest.raises(InvalidInput, match=r"vision_config\.patch_size: must be an integer"):
        toy_reader({**config, "vision_config": {"patch_size": 1.5}})
