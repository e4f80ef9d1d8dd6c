"""A Hugging Face model's ``config.json`` as rotary parameters: the fields transformers reads
for RoPE (``rope_parameters`` in transformers 5, ``rope_scaling`` and ``rope_theta`` before;
``head_dim`` or ``hidden_size / num_attention_heads``; ``partial_rotary_factor``;
``max_position_embeddings``), translated to the query of ``GET /v1/encodings/rotary``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from service.encodings import scalings
from service.errors import InvalidInput

# rope_type as configs spell it -> the service's scaling
ROPE_TYPES: Final[dict[str, scalings.Scaling]] = {
    "default": "none",
    "linear": "linear",
    "dynamic": "dynamic",
    "yarn": "yarn",
    "longrope": "longrope",
    "llama3": "llama3",
}
# keys of a rope dict that are not a scaling's parameters
_LISTS: Final = {"short_factor", "long_factor"}
_GENERAL: Final = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}


def _rope_dict(config: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    for name in ("rope_parameters", "rope_scaling"):
        value = config.get(name)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise InvalidInput(name, "must be an object")
        nested = [key for key, item in value.items() if isinstance(item, Mapping)]
        if nested:
            raise InvalidInput(
                name,
                f"holds parameters per layer type ({', '.join(map(str, nested))}): post one "
                "layer type's parameters as rope_parameters",
            )
        return name, value
    return "rope_parameters", {}


def _head_dim(config: Mapping[str, Any]) -> int:
    # DeepSeek's rotary part of a head is its own width (transformers sets head_dim to it)
    head_dim = config.get("qk_rope_head_dim", config.get("head_dim"))
    if head_dim is None:
        hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
        if not (isinstance(hidden, int) and isinstance(heads, int) and heads > 0):
            raise InvalidInput(
                "head_dim", "the config needs head_dim, or hidden_size and num_attention_heads"
            )
        head_dim = hidden // heads
    if not _integer(head_dim) or head_dim < 1:
        raise InvalidInput("head_dim", "must be a positive integer")
    return int(head_dim)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def rotary_query(config: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of the model's rotary table, as ``GET /v1/encodings/rotary`` names
    them (``max_len`` is the config's ``max_position_embeddings`` when it has one). A
    ``rope_type`` the service does not know is an :class:`InvalidInput` naming it."""
    where, rope = _rope_dict(config)
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if not isinstance(rope_type, str) or rope_type not in ROPE_TYPES:
        known = ", ".join(ROPE_TYPES)
        raise InvalidInput(
            f"{where}.rope_type", f"'{str(rope_type)[:60]}' is not a known rope_type ({known})"
        )
    scaling = ROPE_TYPES[rope_type]
    query: dict[str, Any] = {
        "head_dim": _head_dim(config),
        "base": rope.get(
            "rope_theta", config.get("rope_theta", config.get("rotary_emb_base", 10000.0))
        ),
        "partial_rotary_factor": rope.get(
            "partial_rotary_factor",
            config.get("partial_rotary_factor", config.get("rotary_pct", 1.0)),
        ),
        "scaling": scaling,
    }
    mpe = config.get("max_position_embeddings")
    takes = scalings.PARAMETERS[scaling]
    for name, value in rope.items():
        if name in _GENERAL or value is None:
            continue
        if name not in takes:
            continue
        if name in _LISTS and isinstance(value, list):
            query[name] = ",".join(map(str, value))
        elif isinstance(value, (list, dict)) or (isinstance(value, bool) and name != "truncate"):
            raise InvalidInput(f"{where}.{name}", f"must be a number, not {type(value).__name__}")
        else:
            query[name] = value
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
    if mpe is not None:
        query["max_len"] = mpe
    return {key: value for key, value in query.items() if value is not None}
