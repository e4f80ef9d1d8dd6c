"""One set of a config's rope parameters as the query of ``GET /v1/encodings/rotary``: the
fields transformers reads for RoPE (``rope_parameters`` in transformers 5, ``rope_scaling``
and ``rope_theta`` before; ``head_dim`` or ``hidden_size / num_attention_heads``;
``partial_rotary_factor``, GPT-NeoX's ``rotary_pct``, GPT-J's ``rotary_dim``;
``max_position_embeddings``), and the same as vLLM reads it."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from service.encodings import engines, scalings
from service.errors import InvalidInput
from service.schemas import hf_config
from service.schemas.hf_config import INTEGER, KINDS, NUMBER, NUMBERS, STRING, Reader, listed
from service.schemas.hf_models import ModelType
from service.text import shown

# what this reading reads, by the common names, and what each holds: the scalings' parameters
# are numbers but for these
FIELDS: Final = hf_config.fields(
    {
        **dict.fromkeys(KINDS, STRING),
        **dict.fromkeys(scalings.ALL_PARAMETERS, NUMBER),
        **dict.fromkeys(("short_factor", "long_factor", "mrope_section"), NUMBERS),
        "truncate": hf_config.BOOLEAN,
        "mrope_interleaved": hf_config.BOOLEAN,
        **dict.fromkeys(
            (
                "max_position_embeddings",
                "original_max_position_embeddings",
                "seq_len",
                "head_dim",
                "qk_rope_head_dim",
                "hidden_size",
                "num_attention_heads",
                "rotary_dim",
            ),
            INTEGER,
        ),
        **dict.fromkeys(
            ("rope_theta", "rotary_emb_base", "partial_rotary_factor", "rotary_pct"), NUMBER
        ),
    }
)
# rope_type as configs spell it -> the service's scaling: each scaling's own, and Qwen2-VL's
# older configs' mrope (its sections are read beside)
ROPE_TYPES: Final[dict[str, scalings.Scaling]] = {
    **{rule.rope_type: name for name, rule in scalings.RULES.items() if rule.rope_type},
    "mrope": "none",
}


def rope_of(config: Reader) -> Reader:
    """The config's rope parameters (``rope_parameters``, else ``rope_scaling``) of one set:
    parameters per layer type are :mod:`service.schemas.hf_layers`' to choose from."""
    for name in ("rope_parameters", "rope_scaling"):
        rope = config.object(name)
        if rope is None:
            continue
        nested = [key for key, item in rope.values.items() if isinstance(item, Mapping)]
        if nested and not KINDS & rope.values.keys():
            raise InvalidInput(
                rope.path[:-1],
                f"holds parameters per layer type ({listed(nested)}) without layer_types",
            )
        return rope
    return config.within({}, "rope_parameters")


def head_dim_of(config: Reader, key: str | None = None) -> int:
    """The head's width: the field ``key`` names, else ``qk_rope_head_dim`` (DeepSeek's
    rotary part of a head, which transformers takes as head_dim) or ``head_dim``, else
    ``hidden_size / num_attention_heads``, as transformers reads them."""
    if key is not None:
        head_dim: Any = config.values.get(key)
        if head_dim is not None and (isinstance(head_dim, bool) or not isinstance(head_dim, int)):
            raise InvalidInput(config.path + key, "must be an integer (head_dim_key names it)")
        if head_dim is not None:
            config.record(config.path + key)
    else:
        head_dim = config.get("qk_rope_head_dim") or config.get("head_dim")
    if head_dim is None:
        hidden = config.get("hidden_size")
        heads = config.get("num_attention_heads")
        if hidden is None or not heads:
            raise InvalidInput(
                config.path + "head_dim",
                "the config needs head_dim, or hidden_size and num_attention_heads",
            )
        head_dim = hidden // heads
    if head_dim < 1:
        raise InvalidInput(config.path + "head_dim", "must be a positive integer")
    return int(head_dim)


def _first(*getters: Callable[[], Any]) -> Any:
    """The first value one of ``getters`` finds, the later ones not asked: a class's default
    is taken (and recorded) only where nothing before it is given."""
    return next((value for get in getters if (value := get()) is not None), None)


def _factor_of(config: Reader, head_dim: int) -> float | None:
    """GPT-J's ``rotary_dim`` (the rotated part of a head, in dimensions) as the
    ``partial_rotary_factor`` that gives it: ``int(head_dim * factor)`` is ``rotary_dim``."""
    rotated = config.get("rotary_dim")
    if rotated is None:
        return None
    if not 2 <= rotated <= head_dim:
        given = "" if "rotary_dim" in config.values else " (its class's default)"
        raise InvalidInput(
            f"{config.path}rotary_dim", f"is {rotated}{given}: it must be from 2 to {head_dim}"
        )
    factor = rotated / head_dim
    return factor if int(head_dim * factor) == rotated else math.nextafter(factor, 1.0)


def table_query(config: Reader, rope: Reader, head_dim: int) -> dict[str, Any]:
    """The parameters of one rotary table, as ``GET /v1/encodings/rotary`` names them
    (``max_len`` is the config's ``max_position_embeddings`` when it has one), from the
    text model's ``config`` and one set of its ``rope`` parameters. A ``rope_type`` the
    service does not know, or a field of the wrong type, is an :class:`InvalidInput`
    naming it."""
    rope_type = _first(lambda: rope.get("rope_type"), lambda: rope.get("type"), lambda: "default")
    if rope_type not in ROPE_TYPES:
        known = ", ".join(ROPE_TYPES)
        raise InvalidInput(
            f"{rope.path}rope_type", f"{shown(rope_type)!r} is not a known rope_type ({known})"
        )
    scaling = ROPE_TYPES[rope_type]
    mpe = config.get("max_position_embeddings")
    query: dict[str, Any] = {
        "head_dim": head_dim,
        "base": _first(
            lambda: rope.get("rope_theta"),
            lambda: config.get("rope_theta"),
            # RotaryEmbeddingConfigMixin's default, named as a class's default is
            lambda: config.get("rotary_emb_base"),
            lambda: config.get_or("rope_theta", 10000.0),
        ),
        "partial_rotary_factor": _first(
            lambda: rope.get("partial_rotary_factor"),
            lambda: config.get("partial_rotary_factor"),
            lambda: config.get("rotary_pct"),
            lambda: _factor_of(config, head_dim),
            lambda: 1.0,
        ),
        "scaling": scaling,
    }
    if config.known is not None and config.known.convention is not None:
        query["convention"] = config.known.convention
    takes = scalings.PARAMETERS[scaling]
    for name in takes:
        value = rope.get(name)
        if value is not None:
            query[name] = ",".join(map(str, value)) if isinstance(value, list) else value
    if "max_position_embeddings" in takes and mpe is not None:
        query["max_position_embeddings"] = mpe
    if "original_max_position_embeddings" in takes:
        # as transformers' standardize_rope_params: a top-level value wins (Phi-3 keeps the
        # pretraining length there), then the rope dict's, then max_position_embeddings
        original = config.get("original_max_position_embeddings")
        if original is not None:
            query["original_max_position_embeddings"] = original
        elif query.get("original_max_position_embeddings") is None and mpe is not None:
            query["original_max_position_embeddings"] = mpe
    sections = rope.get("mrope_section")  # M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL)
    if sections is not None:
        query["mrope_section"] = ",".join(map(str, sections))
        if rope.get("mrope_interleaved"):
            query["mrope_interleaved"] = True
    if mpe is not None:
        query["max_len"] = mpe
    return query


def as_vllm(
    top: Reader,
    text: Reader,
    model: ModelType | None,
    query: dict[str, Any],
    asked: Mapping[str, Any],
) -> None:
    """``query`` as vLLM reads the config: the scaling it runs for the model type's
    (DeepSeek-V2/V3's yarn is its DeepseekScalingRotaryEmbedding), and the table is kept in
    the model's dtype (``dtype``, or ``torch_dtype`` before transformers 5)."""
    if model is not None and query["scaling"] in model.vllm:
        query["scaling"] = model.vllm[query["scaling"]]
    if asked.get("cache_dtype") is None:
        for name in ("dtype", "torch_dtype"):
            where = text if text.values.get(name) is not None else top
            kept = where.values.get(name)
            if kept in engines.CACHE_DTYPES:
                text.record(where.path + name)
                query["cache_dtype"] = kept
                break
