"""The RoPE scalings: which parameters each takes (under the names of Hugging Face's
``rope_scaling``/``rope_parameters``), their defaults, and the values they resolve to.

The formulas are those of transformers' ``modeling_rope_utils.py``, one function per
scaling (cited in :data:`SOURCES`); ``ntk`` is the static "NTK-aware" base change that
``dynamic`` applies at a given sequence length. The inverse frequencies are computed from
the resolved values exactly (:mod:`._rope_exact`) or as transformers does
(:mod:`._rope_library`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

from service.errors import InvalidParameter

Scaling = Literal["none", "linear", "ntk", "dynamic", "yarn", "longrope", "llama3", "proportional"]
# what a request may name: a table's scalings, and one an engine computes as another
# (:mod:`.engines`: DeepSeek's yarn)
Asked = Literal[
    "none",
    "linear",
    "ntk",
    "dynamic",
    "yarn",
    "longrope",
    "llama3",
    "proportional",
    "deepseek_yarn",
]
SCALINGS: Final[tuple[Scaling, ...]] = get_args(Scaling)
# A scaling's resolved parameters, in a fixed order: part of a table's key.
Params = tuple[tuple[str, Any], ...]

_UTILS: Final = "transformers/modeling_rope_utils.py"
SOURCES: Final[dict[Scaling, str]] = {
    "none": "transformers/models/llama/modeling_llama.py: "
    "LlamaRotaryEmbedding.compute_default_rope_parameters",
    "linear": f"{_UTILS}: _compute_linear_scaling_rope_parameters",
    "ntk": "static NTK-aware scaling (bloc97, 2023): base * factor^(d/(d-2)); "
    f"the base change of {_UTILS}: _compute_dynamic_ntk_parameters at a fixed factor",
    "dynamic": f"{_UTILS}: _compute_dynamic_ntk_parameters",
    "yarn": f"{_UTILS}: _compute_yarn_parameters",
    "longrope": f"{_UTILS}: _compute_longrope_parameters",
    "llama3": f"{_UTILS}: _compute_llama3_parameters",
    "proportional": f"{_UTILS}: _compute_proportional_rope_parameters (transformers 5; Gemma 4)",
}
# The parameters each scaling takes; those in REQUIRED must be given.
PARAMETERS: Final[dict[Scaling, tuple[str, ...]]] = {
    "none": (),
    "linear": ("factor",),
    "ntk": ("factor",),
    "dynamic": ("factor", "max_position_embeddings", "seq_len"),
    "yarn": (
        "factor",
        "original_max_position_embeddings",
        "max_position_embeddings",
        "beta_fast",
        "beta_slow",
        "mscale",
        "mscale_all_dim",
        "attention_factor",
        "truncate",
    ),
    "longrope": (
        "short_factor",
        "long_factor",
        "original_max_position_embeddings",
        "max_position_embeddings",
        "factor",
        "attention_factor",
    ),
    "llama3": (
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
    ),
    # and the rotated pairs, int(partial_rotary_factor * head_dim // 2): the rest are zero
    "proportional": ("factor",),
}
REQUIRED: Final[dict[Scaling, tuple[str, ...]]] = {
    "none": (),
    "linear": ("factor",),
    "ntk": ("factor",),
    "dynamic": ("factor", "max_position_embeddings"),
    "yarn": ("original_max_position_embeddings",),
    "longrope": ("short_factor", "long_factor", "original_max_position_embeddings"),
    "llama3": PARAMETERS["llama3"],
    "proportional": (),
}
MAX_ATTENTION: Final = 1000.0  # cos and sin times it stay finite in float16
MAX_FACTORS: Final = 8192  # longrope's factors: one per pair of the widest head
ALL_PARAMETERS: Final = tuple(dict.fromkeys(p for names in PARAMETERS.values() for p in names))


def resolve(
    scaling: Scaling,
    given: Mapping[str, Any],
    rotary_dim: int,
    max_len: int,
    rotated: int | None = None,
) -> Params:
    """The scaling's parameters with defaults filled in and derived values computed as
    transformers computes them (the attention factor, yarn's factor, the sequence length
    of ``dynamic``, the factors ``longrope`` uses for a table of ``max_len`` positions):
    equal tables resolve to equal parameters. A parameter the scaling does not take, or a
    missing one, is an :class:`InvalidParameter` that names it."""
    for name in given:
        if name not in PARAMETERS[scaling]:
            takes = ", ".join(PARAMETERS[scaling]) or "no parameters"
            raise InvalidParameter(
                name, f"is not a parameter of scaling={scaling} (it takes {takes})"
            )
    missing = [name for name in REQUIRED[scaling] if given.get(name) is None]
    if missing:  # every one at once, not one request at a time
        verb = "is" if len(missing) == 1 else "are"
        raise InvalidParameter(
            missing[0], f"{verb} required by scaling={scaling}", also=tuple(missing[1:])
        )
    if scaling in ("ntk", "dynamic") and rotary_dim <= 2:
        raise InvalidParameter("head_dim", f"scaling={scaling} needs a rotary dimension above 2")
    if scaling == "none":
        return ()
    if scaling in ("linear", "ntk"):
        return (("factor", _positive(given, "factor")),)
    if scaling == "proportional":  # the whole head; the pairs past ``rotated`` do not turn
        factor = _positive(given, "factor") if given.get("factor") is not None else 1.0
        return (("factor", factor), ("rotated", rotary_dim // 2 if rotated is None else rotated))
    if scaling == "dynamic":
        mpe = _position_count(given, "max_position_embeddings")
        seq_len = given.get("seq_len") or max_len
        return (
            ("factor", _positive(given, "factor")),
            ("max_position_embeddings", mpe),
            ("seq_len", max(int(seq_len), mpe)),
        )
    if scaling == "yarn":
        return _yarn(given, rotary_dim)
    if scaling == "longrope":
        return _longrope(given, rotary_dim, max_len)
    return (
        ("factor", _positive(given, "factor")),
        ("low_freq_factor", _positive(given, "low_freq_factor")),
        ("high_freq_factor", _above(given, "high_freq_factor", given["low_freq_factor"])),
        (
            "original_max_position_embeddings",
            _position_count(given, "original_max_position_embeddings"),
        ),
    )


def _positive(given: Mapping[str, Any], name: str) -> float:
    value = float(given[name])
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameter(name, "must be a positive finite number")
    return value


def checked_attention(value: float, derived: tuple[str, str] | None = None) -> float:
    """An attention factor, given or derived: positive, and small enough that cos and sin
    times it stay finite in float16. A derived one out of range is blamed on what it was
    derived from (``derived``: the parameter to name, and how), which the client sent, not
    on attention_factor, which it did not."""
    if not (math.isfinite(value) and 0 < value <= MAX_ATTENTION):
        within = f"it must be in (0, {MAX_ATTENTION:g}]"
        if derived is None:
            raise InvalidParameter("attention_factor", f"is {value:.6g}: {within}")
        name, how = derived
        raise InvalidParameter(name, f"{how} derives an attention factor of {value:.6g}: {within}")
    return float(value)


def _above(given: Mapping[str, Any], name: str, low: float) -> float:
    """high_freq_factor: at least low_freq_factor. Equal ones (Llama 4 Scout's 1 and 1)
    leave no band to blend: each pair is scaled by 1/factor or not at all, as transformers
    (which only warns) and vLLM's ``llama3_rope.py`` compute it."""
    value = _positive(given, name)
    if value < float(low):
        raise InvalidParameter(name, f"must be at least low_freq_factor ({low})")
    return value


def _position_count(given: Mapping[str, Any], name: str) -> int:
    value = given[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParameter(name, "must be a positive integer")
    return value


def _factor(given: Mapping[str, Any], scaling: str) -> float:
    """``factor``, else ``max_position_embeddings / original_max_position_embeddings``
    (as transformers derives it for yarn and longrope)."""
    if given.get("factor") is not None:
        return _positive(given, "factor")
    if given.get("max_position_embeddings") is None:
        raise InvalidParameter(
            "factor", f"scaling={scaling} needs factor, or max_position_embeddings to derive it"
        )
    mpe = _position_count(given, "max_position_embeddings")
    return mpe / _position_count(given, "original_max_position_embeddings")


def _factor_name(given: Mapping[str, Any]) -> str:
    """The parameter a yarn or longrope factor came from: itself, or the context it is
    derived from (see :func:`_factor`)."""
    return "factor" if given.get("factor") is not None else "max_position_embeddings"


def _yarn(given: Mapping[str, Any], rotary_dim: int) -> Params:
    factor = _factor(given, "yarn")
    original = _position_count(given, "original_max_position_embeddings")

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = given.get("attention_factor")
    derived = None
    if attention is None:
        m, m_all = given.get("mscale"), given.get("mscale_all_dim")
        if m and m_all:
            if mscale(factor, m_all) == 0:
                raise InvalidParameter("mscale_all_dim", "makes the attention factor divide by 0")
            attention = mscale(factor, m) / mscale(factor, m_all)
            derived = ("mscale", f"with mscale_all_dim={m_all:g} and factor={factor:g}")
        else:
            attention = mscale(factor)
            derived = (_factor_name(given), f"scaling=yarn with factor={factor:g}")
    params = (
        ("factor", factor),
        ("original_max_position_embeddings", original),
        ("beta_fast", float(given.get("beta_fast") or 32)),
        ("beta_slow", float(given.get("beta_slow") or 1)),
        ("truncate", bool(given.get("truncate", True))),
        ("attention_factor", checked_attention(attention, derived)),
    )
    yarn_range(rotary_dim, 2.0, dict(params))  # raises if not finite, for every base
    return params


def _longrope(given: Mapping[str, Any], rotary_dim: int, max_len: int) -> Params:
    original = _position_count(given, "original_max_position_embeddings")
    factors: dict[str, tuple[float, ...]] = {}
    for name in ("short_factor", "long_factor"):
        values = tuple(float(v) for v in given[name])
        if len(values) != rotary_dim // 2:
            raise InvalidParameter(
                name, f"has {len(values)} numbers; the rotary dimension needs {rotary_dim // 2}"
            )
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise InvalidParameter(name, "must be positive finite numbers")
        factors[name] = values
    attention = given.get("attention_factor")
    derived = None
    if attention is None:
        factor = _factor(given, "longrope")
        derived = (_factor_name(given), f"scaling=longrope with factor={factor:g}")
        if factor > 1 and original == 1:
            raise InvalidParameter(
                "original_max_position_embeddings",
                "must be at least 2 to derive the attention factor (or give attention_factor)",
            )
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    chosen = factors["long_factor" if max_len > original else "short_factor"]
    return (
        ("ext_factors", chosen),
        ("attention_factor", checked_attention(attention, derived)),
    )


def attention_factor(params: Params) -> float:
    """What cos and sin are multiplied by (yarn and longrope; else 1)."""
    return float(dict(params).get("attention_factor", 1.0))


def yarn_range(rotary_dim: int, base: float, params: Mapping[str, Any]) -> tuple[float, float]:
    """The pairs between which yarn's ramp runs (``find_correction_range``, float64)."""

    def dim(rotations: float) -> float:
        wavelengths = params["original_max_position_embeddings"] / (rotations * 2 * math.pi)
        return (rotary_dim * math.log(wavelengths)) / (2 * math.log(base))

    low, high = dim(params["beta_fast"]), dim(params["beta_slow"])
    for name, value in [("beta_fast", low), ("beta_slow", high)]:
        if not math.isfinite(value):
            raise InvalidParameter(name, "gives a correction range that is not finite")
    if params["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, rotary_dim - 1)
