"""A Hugging Face model's ``config.json`` as rotary parameters: the fields transformers reads
for RoPE (``rope_parameters`` in transformers 5, ``rope_scaling`` and ``rope_theta`` before;
``head_dim`` or ``hidden_size / num_attention_heads``; ``partial_rotary_factor``;
``max_position_embeddings``), translated to the query of ``GET /v1/encodings/rotary``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from service.encodings import scalings
from service.errors import InvalidInput, MalformedBody
from service.text import shown

# rope_type as configs spell it -> the service's scaling
ROPE_TYPES: Final[dict[str, scalings.Scaling]] = {
    "default": "none",
    "linear": "linear",
    "dynamic": "dynamic",
    "yarn": "yarn",
    "longrope": "longrope",
    "llama3": "llama3",
    "proportional": "proportional",
    "mrope": "none",  # Qwen2-VL's older configs; its sections are read beside
}
_LISTS: Final = {"short_factor", "long_factor", "mrope_section", "no_rope_layers"}
_INTEGERS: Final = {
    "max_position_embeddings",
    "original_max_position_embeddings",
    "seq_len",
    "head_dim",
    "qk_rope_head_dim",
    "hidden_size",
    "num_attention_heads",
    "num_hidden_layers",
    "global_head_dim",
    "sliding_window_pattern",
    "no_rope_layer_interval",
}
_BOOLEANS: Final = {"truncate", "mrope_interleaved", "attn_temperature_tuning"}
_KINDS: Final = {"rope_type", "type"}
# names a problem lists from a config before "and N more": a config may hold any number
_FEW: Final = 3


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# what a field holds in transformers' configs, and how a problem says it
_TYPES: Final[dict[str, tuple[Callable[[Any], bool], str]]] = {
    **{
        name: ((lambda v: _is_number(v) and isinstance(v, int)), "an integer") for name in _INTEGERS
    },
    **{name: ((lambda v: isinstance(v, bool)), "true or false") for name in _BOOLEANS},
    **{
        name: ((lambda v: isinstance(v, list) and all(map(_is_number, v))), "a list of numbers")
        for name in _LISTS
    },
    **{name: ((lambda v: isinstance(v, str)), "a string") for name in _KINDS},
}


def _typed(where: str, name: str, value: Any) -> Any:
    """``value`` if it has the type the field ``name`` takes in transformers' configs (an
    integer, a boolean, a list of numbers, a string, else a number), else an
    :class:`InvalidInput` naming ``where``: no strings read as numbers, no booleans as
    numbers."""
    accepts, kind = _TYPES.get(name, (_is_number, "a number"))
    if not accepts(value):
        raise InvalidInput(where, f"must be {kind}, not {type(value).__name__}")
    return value


class Reader:
    """A config's object as read: each field's type checked (:func:`_typed`), and the path
    of each field read (``text_config.rope_parameters.rope_theta``) kept in ``read``,
    shared with the readers of the objects inside it."""

    def __init__(self, values: Mapping[str, Any], path: str = "", read: list[str] | None = None):
        self.values, self.path = values, path
        self.read: list[str] = [] if read is None else read

    def get(self, name: str) -> Any:
        value = self.values.get(name)
        if value is None:
            return None
        where = self.path + name
        if where not in self.read:
            self.read.append(where)
        return _typed(where, name, value)

    def object(self, name: str) -> Reader | None:
        """The object ``name`` holds, or None; anything else there is refused."""
        value = self.values.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InvalidInput(self.path + name, "must be an object")
        return Reader(value, f"{self.path}{name}.", self.read)

    def within(self, values: Mapping[str, Any], name: str) -> Reader:
        """A reader of ``values``, which the config holds at ``name`` (or which stand for it)."""
        return Reader(values, f"{self.path}{name}.", self.read)


def listed(names: list[str]) -> str:
    """The first few of a config's ``names``, each cut short, to quote in a message."""
    listed = ", ".join(shown(name) for name in names[:_FEW])
    more = len(names) - _FEW
    return f"{listed} and {more:,} more" if more > 0 else listed


def rope_of(config: Reader) -> Reader:
    """The config's rope parameters (``rope_parameters``, else ``rope_scaling``) of one set:
    parameters per layer type are :mod:`service.schemas.hf_layers`' to choose from."""
    for name in ("rope_parameters", "rope_scaling"):
        rope = config.object(name)
        if rope is None:
            continue
        nested = [key for key, item in rope.values.items() if isinstance(item, Mapping)]
        if nested and not _KINDS & rope.values.keys():
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
            config.read.append(config.path + key)
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


def _first(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def table_query(config: Reader, rope: Reader, head_dim: int) -> dict[str, Any]:
    """The parameters of one rotary table, as ``GET /v1/encodings/rotary`` names them
    (``max_len`` is the config's ``max_position_embeddings`` when it has one), from the
    text model's ``config`` and one set of its ``rope`` parameters. A ``rope_type`` the
    service does not know, or a field of the wrong type, is an :class:`InvalidInput`
    naming it."""
    rope_type = _first(rope.get("rope_type"), rope.get("type"), "default")
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
            rope.get("rope_theta"), config.get("rope_theta"), config.get("rotary_emb_base"), 10000.0
        ),
        "partial_rotary_factor": _first(
            rope.get("partial_rotary_factor"),
            config.get("partial_rotary_factor"),
            config.get("rotary_pct"),
            1.0,
        ),
        "scaling": scaling,
    }
    takes = scalings.PARAMETERS[scaling]
    for name in takes:
        value = rope.get(name)
        if value is not None:
            query[name] = ",".join(map(str, value)) if name in _LISTS else value
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


# A config's lists and objects, counted before it is parsed: a config.json has a few dozen;
# 1 MiB of nested empty lists is half a million for orjson to build.
MAX_CONTAINERS: Final = 4096


def read_config(body: bytes | bytearray, what: str = "the config") -> dict[str, Any]:
    """A posted ``config.json``: a JSON object, no key given twice in any of its objects."""
    containers = body.count(b"[") + body.count(b"{")
    if containers > MAX_CONTAINERS:
        raise MalformedBody(
            f"{what} holds {containers:,} lists and objects (counting brackets in strings); "
            f"at most {MAX_CONTAINERS:,} are read, a config.json has a few dozen"
        )
    try:
        config = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(f"{what} is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise InvalidInput("body", f"{what} must be a JSON object")
    _refuse_repeated_keys(body, what)
    return config


class _Repeated(Exception):
    """A key that appears twice in one object of the config."""


def _unique(pairs: list[tuple[str, Any]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _Repeated(key)
        seen.add(key)


def _refuse_repeated_keys(body: bytes | bytearray, what: str) -> None:
    """Refuse a config that gives a key twice in any of its objects, as an apply body is
    refused: orjson keeps the last silently (``rope_type`` twice would choose a scaling
    unseen), and only the standard library reports each object's keys. A config is small
    (PE_MAX_CONFIG_BYTES), so it is read a second time; nothing is built from it."""
    try:
        json.loads(body, object_pairs_hook=_unique)
    except _Repeated as exc:
        raise InvalidInput(shown(str(exc.args[0])), f"appears more than once in {what}") from None
    except RecursionError:  # orjson reads 1024 levels, the standard library fewer
        raise MalformedBody(f"{what} is nested too deeply to be read") from None
    except ValueError as exc:  # none known: the two parsers read the same JSON otherwise
        raise MalformedBody(f"{what} is not JSON: {shown(str(exc))}") from None
