"""The RoPE scalings, one record each (:class:`Rule`, in :data:`RULES`): which parameters
it takes (under the names of Hugging Face's ``rope_scaling``/``rope_parameters``) and which
it needs, how it resolves them (defaults filled in, derived values computed), its exact and
its library arithmetic, the ``rope_type`` a config names it by, and how a serving engine
computes it where it differs from transformers. A new scaling is one record here, its two
arithmetic functions and its name in :data:`Scaling` (and its wire fields).

The formulas are those of transformers' ``modeling_rope_utils.py``, one function per
scaling (cited in each record's ``source``); ``ntk`` is the static "NTK-aware" base change
that ``dynamic`` applies at a given sequence length. The inverse frequencies are computed
from the resolved values exactly (:mod:`._rope_exact`) or as transformers does
(:mod:`._rope_library`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np

from service.encodings import _rope_exact, _rope_library
from service.encodings._rope_library import yarn_range as yarn_range  # resolving yarn checks it
from service.encodings.engines import Engine
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
# A scaling's resolved parameters, in a fixed order: part of a table's key.
Params = tuple[tuple[str, Any], ...]
# Given parameters, the rotary dimension, the table's length and the rotated pairs (or
# None: all) to the resolved parameters.
Resolver = Callable[[Mapping[str, Any], int, int, int | None], Params]
# Given parameters, the table's length and the deployment's context (max_model_len) to the
# parameters and the length under which transformers' arithmetic gives an engine's table.
Adapter = Callable[[dict[str, Any], int, int | None], tuple[dict[str, Any], int]]

MAX_ATTENTION: Final = 1000.0  # cos and sin times it stay finite in float16
MAX_FACTORS: Final = 8192  # longrope's factors: one per pair of the widest head
_UTILS: Final = "transformers/modeling_rope_utils.py"


@dataclass(frozen=True, slots=True)
class Rule:
    """One scaling: where its formula comes from; the parameters it takes and those it
    needs; how they resolve; its exact (double-double) and library (float32) inverse
    frequencies; the ``rope_type`` configs name it by (None: none does); whether its exact
    frequencies multiply each pair by a factor of its own (work to prepare a key); how far a
    device's frequencies may stray (``device_ulps``); whether
    its table depends on the sequence length (``max_len``, or ``seq_len`` where it takes
    one); whether it keeps the whole head (turning only the rotated pairs); and the
    engines that compute it otherwise, with the names a request may give to variants of
    it (each with its engines)."""

    source: str
    parameters: tuple[str, ...]
    required: tuple[str, ...]
    resolve: Resolver
    exact: Callable[[float, int, Mapping[str, Any]], _rope_exact.Frequencies]
    library: Callable[[float, int, Mapping[str, Any]], _rope_library.Float32Array]
    rope_type: str | None
    # how far a GPU's inverse frequencies may be from the exact ones, in float32 ulps of
    # each: powf's 4 and the CPU's own rounding, and what the scaling computes beside on the
    # device (the precision audit's device envelope)
    device_ulps: float
    factors: bool = False
    lengthwise: bool = False
    whole_head: bool = False
    engines: Mapping[Engine, Adapter] = field(default_factory=dict)
    variants: Mapping[str, Mapping[Engine, Adapter]] = field(default_factory=dict)


def _none(given: Mapping[str, Any], rotary_dim: int, max_len: int, rotated: int | None) -> Params:
    return ()


def _linear(given: Mapping[str, Any], rotary_dim: int, max_len: int, rotated: int | None) -> Params:
    return (("factor", _positive(given, "factor")),)


def _ntk(given: Mapping[str, Any], rotary_dim: int, max_len: int, rotated: int | None) -> Params:
    _above_two("ntk", rotary_dim)
    return (("factor", _positive(given, "factor")),)


def _proportional(
    given: Mapping[str, Any], rotary_dim: int, max_len: int, rotated: int | None
) -> Params:
    """The whole head; the pairs past ``rotated`` do not turn."""
    factor = _positive(given, "factor") if given.get("factor") is not None else 1.0
    return (("factor", factor), ("rotated", rotary_dim // 2 if rotated is None else rotated))


def _dynamic(
    given: Mapping[str, Any], rotary_dim: int, max_len: int, rotated: int | None
) -> Params:
    _above_two("dynamic", rotary_dim)
    mpe = _position_count(given, "max_position_embeddings")
    seq_len = given.get("seq_len") or max_len
    return (
        ("factor", _positive(given, "factor")),
        ("max_position_embeddings", mpe),
        ("seq_len", max(int(seq_len), mpe)),
    )


def _llama3(given: Mapping[str, Any], rotary_dim: int, max_len: int, rotated: int | None) -> Params:
    return (
        ("factor", _positive(given, "factor")),
        ("low_freq_factor", _positive(given, "low_freq_factor")),
        ("high_freq_factor", _above(given, "high_freq_factor", given["low_freq_factor"])),
        (
            "original_max_position_embeddings",
            _position_count(given, "original_max_position_embeddings"),
        ),
    )


def _above_two(scaling: str, rotary_dim: int) -> None:
    """ntk and dynamic change the base by a power of ``d / (d - 2)``."""
    if rotary_dim <= 2:
        raise InvalidParameter("head_dim", f"scaling={scaling} needs a rotary dimension above 2")


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


def _yarn(given: Mapping[str, Any], rotary_dim: int, max_len: int, rotated: int | None) -> Params:
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


def _longrope(
    given: Mapping[str, Any], rotary_dim: int, max_len: int, rotated: int | None
) -> Params:
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


def _mscale(scale: float, m: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


# The engines' variants (:mod:`.engines`: vLLM 0.33.0), as the parameters and length under
# which transformers' arithmetic gives the engine's table.


def _vllm_dynamic(
    values: dict[str, Any], max_len: int, max_model_len: int | None
) -> tuple[dict[str, Any], int]:
    """One static table, at ``seq_len = max_position_embeddings`` whatever the sequence."""
    if values.get("seq_len") is not None:
        raise InvalidParameter(
            "seq_len", "engine=vllm builds one static dynamic table: it takes no seq_len"
        )
    if values.get("max_position_embeddings") is not None:
        values["seq_len"] = values["max_position_embeddings"]
    return values, max_len


def _vllm_longrope(
    values: dict[str, Any], max_len: int, max_model_len: int | None
) -> tuple[dict[str, Any], int]:
    """The factors the deployment's ``max_model_len`` picks (by default
    ``original_max_position_embeddings``: short ones), for every position."""
    original = values.get("original_max_position_embeddings")
    deployed = max_model_len if max_model_len is not None else original
    return values, max_len if deployed is None else deployed


def _vllm_deepseek_yarn(
    values: dict[str, Any], max_len: int, max_model_len: int | None
) -> tuple[dict[str, Any], int]:
    """yarn whose cos and sin are multiplied by ``mscale(factor, mscale) /
    mscale(factor, mscale_all_dim)``, the correction range always truncated."""
    if max_model_len is not None:
        raise InvalidParameter("max_model_len", "is for engine=vllm with scaling=longrope")
    factor = values.get("factor")
    if factor is None or not (math.isfinite(factor) and factor > 0):
        raise InvalidParameter("factor", "is required by scaling=deepseek_yarn (engine=vllm)")
    m, m_all = values.pop("mscale", None), values.pop("mscale_all_dim", None)
    above = _mscale(factor, 1.0 if m is None else m)
    below = _mscale(factor, 0.0 if m_all is None else m_all)
    if below == 0:
        raise InvalidParameter("mscale_all_dim", "makes the attention factor divide by 0")
    # attention_factor is not read here (vLLM does not): a factor out of range is blamed on
    # what was sent, mscale where its part is out of range, else mscale_all_dim, else factor
    wrong = not 0 < above <= MAX_ATTENTION or m_all is None
    blamed = "mscale" if m is not None and wrong else "mscale_all_dim"
    blamed = "factor" if m is None and m_all is None else blamed
    how = f"with factor {factor:g}, mscale(factor, mscale) / mscale(factor, mscale_all_dim)"
    values["attention_factor"] = checked_attention(above / below, (blamed, how))
    values["truncate"] = True
    return values, max_len


_YARN: Final = (
    "factor",
    "original_max_position_embeddings",
    "max_position_embeddings",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "attention_factor",
    "truncate",
)
_LONGROPE: Final = (
    "short_factor",
    "long_factor",
    "original_max_position_embeddings",
    "max_position_embeddings",
    "factor",
    "attention_factor",
)
_LLAMA3: Final = (
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position_embeddings",
)

# Every scaling, by the name Scaling gives it, in its order.
RULES: Final[dict[Scaling, Rule]] = {
    "none": Rule(
        source="transformers/models/llama/modeling_llama.py: "
        "LlamaRotaryEmbedding.compute_default_rope_parameters",
        parameters=(),
        required=(),
        resolve=_none,
        exact=_rope_exact.default,
        library=_rope_library.default,
        rope_type="default",
        device_ulps=5.0,
    ),
    "linear": Rule(
        source=f"{_UTILS}: _compute_linear_scaling_rope_parameters",
        parameters=("factor",),
        required=("factor",),
        resolve=_linear,
        exact=_rope_exact.linear,
        library=_rope_library.linear,
        rope_type="linear",
        device_ulps=5.0,
    ),
    "ntk": Rule(
        source="static NTK-aware scaling (bloc97, 2023): base * factor^(d/(d-2)); "
        f"the base change of {_UTILS}: _compute_dynamic_ntk_parameters at a fixed factor",
        parameters=("factor",),
        required=("factor",),
        resolve=_ntk,
        exact=_rope_exact.ntk,
        library=_rope_library.ntk,
        rope_type=None,
        device_ulps=5.0,
    ),
    "dynamic": Rule(
        source=f"{_UTILS}: _compute_dynamic_ntk_parameters",
        parameters=("factor", "max_position_embeddings", "seq_len"),
        required=("factor", "max_position_embeddings"),
        resolve=_dynamic,
        exact=_rope_exact.dynamic,
        library=_rope_library.dynamic,
        rope_type="dynamic",
        device_ulps=11.0,  # its base is a device pow too: both errors reach the frequency
        lengthwise=True,
        engines={"vllm": _vllm_dynamic},
    ),
    "yarn": Rule(
        source=f"{_UTILS}: _compute_yarn_parameters",
        parameters=_YARN,
        required=("original_max_position_embeddings",),
        resolve=_yarn,
        exact=_rope_exact.yarn,
        library=_rope_library.yarn,
        rope_type="yarn",
        device_ulps=6.0,
        factors=True,
        variants={"deepseek_yarn": {"vllm": _vllm_deepseek_yarn}},
    ),
    "longrope": Rule(
        source=f"{_UTILS}: _compute_longrope_parameters",
        parameters=_LONGROPE,
        required=("short_factor", "long_factor", "original_max_position_embeddings"),
        resolve=_longrope,
        exact=_rope_exact.longrope,
        library=_rope_library.longrope,
        rope_type="longrope",
        device_ulps=8.0,
        factors=True,
        lengthwise=True,
        engines={"vllm": _vllm_longrope},
    ),
    "llama3": Rule(
        source=f"{_UTILS}: _compute_llama3_parameters",
        parameters=_LLAMA3,
        required=_LLAMA3,
        resolve=_llama3,
        exact=_rope_exact.llama3,
        library=_rope_library.llama3,
        rope_type="llama3",
        device_ulps=6.0,
        factors=True,
    ),
    # and the rotated pairs, int(partial_rotary_factor * head_dim // 2): the rest are zero
    "proportional": Rule(
        source=f"{_UTILS}: _compute_proportional_rope_parameters (transformers 5; Gemma 4)",
        parameters=("factor",),
        required=(),
        resolve=_proportional,
        exact=_rope_exact.proportional,
        library=_rope_library.proportional,
        rope_type="proportional",
        device_ulps=5.0,
        whole_head=True,
    ),
}
SCALINGS: Final[tuple[Scaling, ...]] = tuple(RULES)
PARAMETERS: Final[dict[Scaling, tuple[str, ...]]] = {
    name: rule.parameters for name, rule in RULES.items()
}
ALL_PARAMETERS: Final = tuple(dict.fromkeys(p for names in PARAMETERS.values() for p in names))
# What a request may name (Asked): each scaling, and its variants, with the table scaling
# each is computed as and the engines that compute it otherwise.
ASKED: Final[dict[str, tuple[Scaling, Mapping[Engine, Adapter]]]] = {
    **{name: (name, rule.engines) for name, rule in RULES.items()},
    **{
        variant: (name, engines)
        for name, rule in RULES.items()
        for variant, engines in rule.variants.items()
    },
}


def rule_of(asked: str) -> Rule:
    """The record of the scaling a request names (a variant's: the scaling it is)."""
    return RULES[ASKED[asked][0]]


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
    rule = RULES[scaling]
    for name in given:
        if name not in rule.parameters:
            takes = ", ".join(rule.parameters) or "no parameters"
            raise InvalidParameter(
                name, f"is not a parameter of scaling={scaling} (it takes {takes})"
            )
    missing = [name for name in rule.required if given.get(name) is None]
    if missing:  # every one at once, not one request at a time
        verb = "is" if len(missing) == 1 else "are"
        raise InvalidParameter(
            missing[0], f"{verb} required by scaling={scaling}", also=tuple(missing[1:])
        )
    return rule.resolve(given, rotary_dim, max_len, rotated)


def resolve_for(
    engine: Engine,
    asked: str,
    given: Mapping[str, Any],
    rotary_dim: int,
    max_len: int,
    rotated: int,
    max_model_len: int | None = None,
) -> tuple[Scaling, Params]:
    """The table's scaling and resolved parameters (:func:`resolve`) for the scaling a
    request names as ``engine`` computes it: its parameters and the sequence length
    adapted where the engine's arithmetic differs from transformers'."""
    scaling, engines = ASKED[asked]
    adapt = engines.get(engine)
    if adapt is None:
        if max_model_len is not None:
            raise InvalidParameter("max_model_len", "is for engine=vllm with scaling=longrope")
        values, length = dict(given), max_len
    else:
        values, length = adapt(dict(given), max_len, max_model_len)
    return scaling, resolve(scaling, values, rotary_dim, length, rotated)


def attention_factor(params: Params) -> float:
    """What cos and sin are multiplied by (yarn and longrope; else 1)."""
    return float(dict(params).get("attention_factor", 1.0))


def exact_frequencies(
    scaling: Scaling, base: float, rotary_dim: int, params: Params
) -> _rope_exact.Frequencies:
    """The inverse frequencies of the ``rotary_dim // 2`` pairs, exactly (double-double);
    those of the last keys are kept."""
    rule = RULES[scaling]
    return _rope_exact.kept(
        (scaling, base, rotary_dim, params), lambda: rule.exact(base, rotary_dim, dict(params))
    )


def library_frequencies(
    scaling: Scaling, base: float, rotary_dim: int, params: Params
) -> _rope_library.Float32Array:
    """The float32 inverse frequencies transformers computes for the scaling (parameters at
    the edge of their domain may make some 0, infinite or NaN: :func:`.rotary.check`)."""
    with np.errstate(all="ignore"):
        return RULES[scaling].library(base, rotary_dim, dict(params))


def preparation(scaling: Scaling, base: float, rotary_dim: int, params: Params) -> int:
    """What computing the key's exact frequencies costs, in table numbers: 0 once they are
    kept, or when the scaling multiplies no pair by a factor of its own."""
    if not RULES[scaling].factors or _rope_exact.is_kept((scaling, base, rotary_dim, params)):
        return 0
    return rotary_dim // 2 * _rope_exact.PAIR_COST
