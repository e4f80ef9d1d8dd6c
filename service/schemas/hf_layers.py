"""From-config's query (:class:`FromConfigQuery`), and a model's ``config.json`` as the
rotary tables of its text model, read as transformers 5.23 reads it:

- a multimodal config's text model is its ``text_config`` (Qwen2.5-VL, Qwen3-VL, Gemma 3,
  Llama 4), where it nests one; else the config itself (Qwen2-VL's flat configs);
- rope parameters per layer type (``modeling_rope_utils.RotaryEmbeddingConfigMixin``:
  ``rope_parameters`` keyed by layer type, ``layer_types`` naming each layer's), or a
  model type's older fields (Gemma 3's ``rope_local_base_freq``); without ``layer_types``,
  layer ``i`` is ``full_attention`` where ``(i + 1) % sliding_window_pattern == 0``, the
  pattern the model type's where the config gives none;
- a model type's full-attention layers may have a wider head (Gemma 4's
  ``global_head_dim``).

What differs by model type is its record in :mod:`service.schemas.hf_models`.

What it read is each field's path (``text_config.rope_parameters.full_attention.factor``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from service.codecs.types import Format
from service.encodings import engines, rotary
from service.encodings.registry import DType, Rounding
from service.errors import InvalidInput, InvalidParameter
from service.schemas import hf_config
from service.schemas.common import Read
from service.schemas.hf_config import INTEGER, KINDS, NUMBER, Reader, listed, model_type
from service.schemas.hf_models import ModelType, gemma3_rope, model_of
from service.schemas.hf_rope import as_vllm, head_dim_of, rope_of, table_query
from service.schemas.llama4 import rope_layers
from service.settings import POSITION_CEILING
from service.text import shown

# what this reading reads beside one set of rope parameters (service.schemas.hf_rope's)
FIELDS: Final = hf_config.fields(
    {
        **dict.fromkeys(
            ("sliding_window_pattern", "num_hidden_layers", "global_head_dim"), INTEGER
        ),
        "rope_local_base_freq": NUMBER,
    }
)
MAX_NAME: Final = 64
# the lists a layered answer holds beside its tables (service.web.layered): safetensors'
# metadata keys them with the tables' names
RESERVED: Final = frozenset({"layer_types", "config_fields"})


def name_refusal(name: str) -> str | None:
    """Why ``name`` cannot name a layer type, or None. A name keys a table in every answer
    (npz and safetensors members ``NAME/cos``, metadata, ``X-Layer-Types``), so it is 1 to
    64 printable characters, no path (``/``, ``\\``, ``..``), and not a list the answer holds
    beside the tables; transformers' are identifiers (``full_attention``, ``sliding_attention``,
    ``chunked_attention``)."""
    if not 1 <= len(name) <= MAX_NAME:
        return f"must be 1 to {MAX_NAME} characters"
    if not name.isprintable():
        return "must be printable (no control characters, no NUL)"
    if "/" in name or "\\" in name or ".." in name:
        return "must not hold a path (/, \\ or ..): it names the answer's members NAME/cos"
    if name in RESERVED:
        return f"must not be {' or '.join(sorted(RESERVED))}, lists the answer holds beside"
    return None


class FromConfigQuery(BaseModel):
    """What a config does not say: which rows, in what form (overriding the config)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_len: int | None = Field(
        None, ge=1, le=POSITION_CEILING + 1, description="Default: max_position_embeddings."
    )
    start: int = Field(0, ge=0, description="First position returned.")
    stop: int | None = Field(None, ge=1, description="Position after the last; default max_len.")
    convention: rotary.Convention | None = Field(
        None, description="As for tables; default half (Llama 4's: interleaved, as it rotates)."
    )
    rounding: Rounding = Field("library", description="As for tables.")
    dtype: DType = Field("float32", description="As for tables.")
    format: Format | None = Field(None, description="As for tables.")
    head_dim_key: str | None = Field(
        None,
        max_length=64,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="The config field that holds the head's width, as transformers' "
        "head_dim_key; default head_dim (and for Gemma 4's full_attention layers, as its "
        "config reads them, global_head_dim).",
    )
    engine: engines.Engine | None = Field(
        None, description="As for tables; vllm reads DeepSeek-V2/V3's yarn as deepseek_yarn."
    )
    max_model_len: int | None = Field(
        None, ge=1, le=POSITION_CEILING + 1, description="As for tables."
    )
    cache_dtype: engines.CacheDType | None = Field(
        None, description="As for tables; with engine=vllm, default the config's dtype."
    )
    layer_type: str | None = Field(
        None,
        max_length=MAX_NAME,
        description="Where the config's rope parameters are per layer type (Gemma 3, Gemma 4): "
        "that type's table (sliding_attention, full_attention). Without it such a config "
        "answers every type's tables (json, npz or safetensors) and which layers use which.",
    )

    @field_validator("layer_type")
    @classmethod
    def _a_layer_types_name(cls, value: str | None) -> str | None:
        refusal = None if value is None else name_refusal(value)
        if refusal is not None:
            raise PydanticCustomError("layer_type", "{refusal}", {"refusal": refusal})
        return value


# far more layers than any model has; a list this long costs the server little
MAX_LAYERS: Final = 1 << 16
# kinds of layer a config may give parameters for: models have two or three; each is a table
MAX_TYPES: Final = 16


def rotary_query(config: dict[str, Any], asked: Mapping[str, Any]) -> Read:
    """The rotary tables of the config's text model: one, or one per layer type (only
    ``asked["layer_type"]``'s where given), with which layers use which type."""
    top = Reader(config)
    text = top.object("text_config") or top
    model = model_of(model_type(top, text))
    text = text.of_class(model)
    per_type = _per_type(text, model)
    key, chosen = asked.get("head_dim_key"), asked.get("layer_type")
    if per_type is None:
        if chosen is not None:
            raise InvalidParameter(
                "layer_type", "the config has one set of rope parameters, not one per layer type"
            )
        query = table_query(text, rope_of(text), head_dim_of(text, key))
        if asked.get("engine") == "vllm":
            as_vllm(top, text, model, query, asked)
        return Read({"": query}, rope_layers(text, model), tuple(text.read))
    layers = _layer_types(text, model, per_type)
    if chosen is not None and chosen not in per_type:
        raise InvalidParameter(
            "layer_type",
            f"{shown(chosen)!r} is not one of the config's layer types ({listed(list(per_type))})",
        )
    names = list(per_type) if chosen is None else [chosen]
    found: dict[str, list[int]] | None = None  # each type's layers, for per_layer_config
    if layers is not None and key is None and text.values.get("per_layer_config") is not None:
        found = {name: [] for name in per_type}
        for index, layer in enumerate(layers):  # one pass, not one a type
            found[layer].append(index)
    tables = {
        name: table_query(
            text,
            per_type[name],
            _head_dim(text, name, model, key, None if found is None else found[name]),
        )
        for name in names
    }
    if asked.get("engine") == "vllm":
        for table in tables.values():
            as_vllm(top, text, model, table, asked)
    if chosen is not None:
        return Read({"": tables[chosen]}, layers, tuple(text.read))
    return Read(tables, layers, tuple(text.read))


def _per_type(text: Reader, model: ModelType | None) -> dict[str, Reader] | None:
    """Each layer type's rope parameters, or None for a config of one set."""
    older = None if model is None else model.older
    if older is None and "rope_local_base_freq" in text.values:  # Gemma 3's, whatever the type
        older = gemma3_rope
    if older is not None and text.values.get("rope_parameters") is None:
        return older(text)
    for name in ("rope_parameters", "rope_scaling"):
        rope = text.object(name)
        if rope is None:
            continue
        nested = [key for key, item in rope.values.items() if isinstance(item, Mapping)]
        if not nested or KINDS & rope.values.keys():
            return None
        if len(nested) > MAX_TYPES:
            raise InvalidInput(
                rope.path[:-1],
                f"holds parameters for {len(nested):,} layer types ({listed(nested)}): at "
                f"most {MAX_TYPES} are read, each a table",
            )
        for name in nested:
            refusal = name_refusal(name)
            if refusal is not None:
                raise InvalidInput(
                    rope.path[:-1],
                    f"names a layer type {shown(name)!r}: a layer type's name {refusal}",
                )
        if len(nested) < len(rope.values):
            loose = [key for key in rope.values if key not in nested]
            raise InvalidInput(
                rope.path[:-1],
                f"holds parameters per layer type and loose fields ({listed(loose)}): "
                "each layer type's parameters are an object",
            )
        return {key: rope.object(key) or rope for key in nested}
    return None


def _layer_types(
    text: Reader, model: ModelType | None, types: Mapping[str, Reader]
) -> list[str] | None:
    """Each layer's type: ``layer_types``, else the pattern (the config's, else its model
    type's); None where neither says."""
    given = text.values.get("layer_types")
    if given is not None:
        if not (isinstance(given, list) and all(isinstance(name, str) for name in given)):
            raise InvalidInput(f"{text.path}layer_types", "must be a list of layer type names")
        text.record(f"{text.path}layer_types")
        layers = list(given)
    else:
        pattern = text.get("sliding_window_pattern") or (None if model is None else model.pattern)
        count = text.get("num_hidden_layers")
        if pattern is None or count is None:
            return None
        if pattern < 1 or not 0 <= count <= MAX_LAYERS:
            raise InvalidInput(
                f"{text.path}num_hidden_layers" if pattern >= 1 else "sliding_window_pattern",
                f"must be from 0 to {MAX_LAYERS:,}" if pattern >= 1 else "must be positive",
            )
        layers = [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(count)
        ]
    if len(layers) > MAX_LAYERS:
        raise InvalidInput(f"{text.path}layer_types", f"names more than {MAX_LAYERS:,} layers")
    if model is not None and model.last_layer is not None and layers:
        layers[-1] = model.last_layer
    unknown = [name for name in dict.fromkeys(layers) if name not in types]
    if unknown:
        raise InvalidInput(
            f"{text.path}layer_types",
            f"names layer types with no rope parameters ({listed(unknown)})",
        )
    return layers


def _head_dim(
    text: Reader, name: str, model: ModelType | None, key: str | None, indices: list[int] | None
) -> int:
    """A layer type's head width: as ``per_layer_config`` (transformers 5's saved form,
    by layer index) says for its layers (``indices``, where the config says which they
    are); Gemma 4's full-attention heads are ``global_head_dim`` (which its config saves as
    ``per_layer_config``)."""
    overrides = text.object("per_layer_config")
    if key is None and overrides is not None and indices is not None:
        widths = set()
        for index in indices:
            layer = overrides.object(str(index))
            width = None if layer is None else layer.get("head_dim")
            widths.add(width)
        if len(widths) > 1:
            raise InvalidInput(
                f"{overrides.path}head_dim",
                f"differs between the {shown(name)} layers: one table per layer type",
            )
        width = widths.pop() if widths else None
        if width is not None:
            if width < 1:
                raise InvalidInput(f"{overrides.path}head_dim", "must be a positive integer")
            return int(width)
        if name == "full_attention" and text.values.get("global_head_dim") is None:
            return head_dim_of(text, key)  # saved by transformers: no override, the head_dim
    if key is None and name == "full_attention":
        wider = text.get("global_head_dim")
        if wider is None and model is not None:
            wider = model.global_head_dim
        if wider is not None:
            if wider < 1:
                raise InvalidInput(f"{text.path}global_head_dim", "must be a positive integer")
            return int(wider)
    return head_dim_of(text, key)
