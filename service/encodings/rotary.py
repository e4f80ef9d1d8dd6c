"""Rotary position embeddings (RoPE): the cos and sin tables that rotate queries and keys,
in numpy only.

Pair ``k`` of the rotary dimension ``r`` turns by ``position * inv_freq[k]``. A table row
holds the ``r`` cosines, then the ``r`` sines (width ``2 r``), in the key's convention:

- ``half`` (Hugging Face's ``rotate_half``, GPT-NeoX): pairs ``(k, k + r/2)``, so columns
  ``k`` and ``k + r/2`` hold pair ``k``'s value, as ``torch.cat((freqs, freqs), -1)`` does;
- ``interleaved`` (Meta's ``apply_rotary_emb``, GPT-J, torchtune): pairs ``(2k, 2k+1)``,
  columns ``2k`` and ``2k+1`` holding pair ``k``'s value.

``rounding=exact`` computes the angles exactly (:mod:`._exact`, from the exact inverse
frequencies of :mod:`.scalings`) and rounds each entry once; ``library`` reproduces
transformers' float32 arithmetic (:mod:`._rope_library`). The yarn and longrope attention
factor multiplies cos and sin, as there.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from service.encodings import _exact, _rope_library, engines, kernels, scalings
from service.encodings.registry import (
    DTYPES,
    ROUNDINGS,
    Angles,
    Audit,
    Bound,
    DType,
    Family,
    Rounding,
    Rows,
    Values,
    register,
    replacing,
)
from service.errors import InvalidParameter

Convention = Literal["half", "interleaved"]
CONVENTIONS: Final[tuple[Convention, ...]] = get_args(Convention)
DEFAULT_BASE: Final = 10000.0
MAX_HEAD_DIM: Final = 16384
_CHUNK_ELEMENTS: Final = 1 << 16
_SCALED_CHUNK_ELEMENTS: Final = 1 << 20  # float64 temporaries of 16 MiB, filled on every core


@dataclass(frozen=True, slots=True)
class RotaryKey:
    """Everything that changes a rotary table's values: the rotary dimension (the rotated
    part of a head: ``int(head_dim * partial_rotary_factor)``), the base, the pairing
    convention, the scaling with its resolved parameters (:func:`scalings.resolve`), the
    rounding and the dtype."""

    rotary_dim: int
    base: float = DEFAULT_BASE
    convention: Convention = "half"
    scaling: scalings.Scaling = "none"
    params: scalings.Params = ()
    dtype: DType = "float32"
    rounding: Rounding = "library"
    # M-RoPE: the pairs each position axis (temporal, height, width) turns, in order; or
    # Qwen3-VL's interleaving of them (:mod:`.mrope`). The table by rows is the same.
    mrope_section: tuple[int, ...] = ()
    mrope_interleaved: bool = False
    # an engine's cache of the table, in the model's dtype (:mod:`.engines`): each entry
    # rounded to it, served in ``dtype``
    cache_dtype: engines.CacheDType = "float32"

    def __post_init__(self) -> None:
        if not 2 <= self.rotary_dim <= MAX_HEAD_DIM or self.rotary_dim % 2:
            raise InvalidParameter(
                "head_dim",
                f"the rotary dimension (int(head_dim * partial_rotary_factor)) is "
                f"{self.rotary_dim}: it must be even, from 2 to {MAX_HEAD_DIM}",
            )
        if not (math.isfinite(self.base) and self.base > 1):
            raise InvalidParameter("base", "must be a finite number greater than 1")
        for name, value, allowed in [
            ("convention", self.convention, CONVENTIONS),
            ("scaling", self.scaling, scalings.SCALINGS),
            ("dtype", self.dtype, DTYPES),
            ("rounding", self.rounding, ROUNDINGS),
            ("cache_dtype", self.cache_dtype, engines.CACHE_DTYPES),
        ]:
            if value not in allowed:
                raise InvalidParameter(name, f"must be one of {', '.join(allowed)}")

    @property
    def width(self) -> int:
        return 2 * self.rotary_dim

    @property
    def pairs(self) -> int:
        return self.rotary_dim // 2

    @property
    def attention(self) -> float:
        """The attention factor that multiplies cos and sin (1 but for yarn and longrope)."""
        return scalings.attention_factor(self.params)


def rotary_dim(head_dim: int, partial_rotary_factor: float) -> int:
    """``int(head_dim * partial_rotary_factor)``, as transformers computes it."""
    if not (math.isfinite(partial_rotary_factor) and 0 < partial_rotary_factor <= 1):
        raise InvalidParameter("partial_rotary_factor", "must be in (0, 1]")
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise InvalidParameter("head_dim", f"must be from 1 to {MAX_HEAD_DIM}")
    return int(head_dim * partial_rotary_factor)


def frequencies(key: RotaryKey) -> tuple[_exact.Float64Array, _exact.Float64Array]:
    """The exact inverse frequencies of the key's pairs (double-double)."""
    return scalings.exact_frequencies(key.scaling, key.base, key.rotary_dim, key.params)


def library_frequencies(key: RotaryKey) -> NDArray[np.float32]:
    """The float32 inverse frequencies transformers computes for the key (with the
    library engine's pow)."""
    return _library_frequencies(key, kernels.label())


@functools.lru_cache(maxsize=64)  # at most 64 x 8,192 float32
def _library_frequencies(key: RotaryKey, engine: str) -> NDArray[np.float32]:
    return scalings.library_frequencies(key.scaling, key.base, key.rotary_dim, key.params)


def check(key: RotaryKey, max_len: int) -> None:
    """That the key's inverse frequencies, and its angles up to position ``max_len - 1``,
    are finite and positive in its arithmetic (scaling parameters at the edge of their
    domain could make them 0, infinite or NaN)."""
    if key.rounding == "library":
        inverse = library_frequencies(key).astype(np.float64)
        last = float(np.float32(max_len - 1) * np.float32(inverse.max()))
    else:
        inverse = frequencies(key)[0]
        last = (max_len - 1) * float(inverse.max())
    turning = dict(key.params).get("rotated", key.pairs)  # proportional: the rest are 0
    positive = np.all(inverse[:turning] > 0) and np.all(inverse[turning:] == 0)
    if not (np.all(np.isfinite(inverse)) and positive and math.isfinite(last)):
        named = ", ".join(name for name, _ in key.params) or "base"
        raise InvalidParameter(
            "scaling",
            f"scaling={key.scaling} with these parameters ({named}) gives inverse frequencies "
            f"or angles that are not finite and positive in {key.rounding} arithmetic",
        )


def halves(key: RotaryKey, out: Rows) -> tuple[Rows, Rows]:
    """The cos and sin halves of rows of the key's table."""
    return out[:, : key.rotary_dim], out[:, key.rotary_dim :]


def _first(key: RotaryKey, half: Rows) -> Rows:
    """The columns of a cos or sin half that hold each pair's value once."""
    return half[:, : key.pairs] if key.convention == "half" else half[:, 0::2]


def _second(key: RotaryKey, half: Rows) -> Rows:
    """The columns that repeat them (the pair's other member)."""
    return half[:, key.pairs :] if key.convention == "half" else half[:, 1::2]


def _mirror(key: RotaryKey, out: Rows) -> None:
    for half in halves(key, out):
        _second(key, half)[...] = _first(key, half)


def _write(key: RotaryKey, positions: NDArray[np.int64], out: Rows) -> None:
    """Rows of ``positions`` into ``out`` where exact angles are not written as they are:
    the library's float32 arithmetic, or exact ones times an attention factor."""
    cos_half, sin_half = halves(key, out)
    cos_out, sin_out = _first(key, cos_half), _first(key, sin_half)
    attention = key.attention
    rows = max(1, _CHUNK_ELEMENTS // key.pairs)
    c: NDArray[np.floating]
    s: NDArray[np.floating]
    for first in range(0, len(positions), rows):
        part = positions[first : first + rows]
        if key.rounding == "library":
            c, s = _rope_library.cos_sin(part, library_frequencies(key), attention)
        else:
            w_hi, w_lo = frequencies(key)
            s, c = np.empty((len(part), key.pairs)), np.empty((len(part), key.pairs))
            _exact.take(part, w_hi, w_lo, (s, c))
            c *= attention
            s *= attention
        cos_out[first : first + len(part)] = c
        sin_out[first : first + len(part)] = s


def _direct(key: RotaryKey) -> bool:
    """Whether the table is exact angles written as they are (the fast, blocked path)."""
    return key.rounding == "exact" and key.attention == 1


def fill(key: RotaryKey, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` written into the arrays ``out``, one after the other."""
    if _direct(key):
        w_hi, w_lo = frequencies(key)
        targets = [
            (_first(key, halves(key, part)[1]), _first(key, halves(key, part)[0])) for part in out
        ]
        _exact.fill(start, w_hi, w_lo, targets)
    first = start
    for part in out:
        if key.rounding == "exact" and not _direct(key):
            _fill_scaled(key, first, part)
        elif not _direct(key):
            positions = np.arange(first, first + len(part), dtype=np.int64)
            spans = _exact.row_spans(len(part), key.rotary_dim)
            jobs = [functools.partial(_write, key, positions[a:b], part[a:b]) for a, b in spans]
            _exact.in_parallel(jobs)
        _mirror(key, part)
        engines.stored(part, key.cache_dtype)
        first += len(part)


def _fill_scaled(key: RotaryKey, start: int, part: Rows) -> None:
    """Exact angles times the attention factor: chunks of rows filled in float64 by the
    blocked path (the bits :func:`_write` gives), each entry then scaled and rounded once."""
    w_hi, w_lo = frequencies(key)
    cos_half, sin_half = halves(key, part)
    cos_out, sin_out = _first(key, cos_half), _first(key, sin_half)
    attention = key.attention
    rows = max(1, _SCALED_CHUNK_ELEMENTS // key.pairs)
    for first in range(0, len(part), rows):
        count = min(rows, len(part) - first)
        s, c = np.empty((count, key.pairs)), np.empty((count, key.pairs))
        _exact.fill(start + first, w_hi, w_lo, [(s, c)])
        c *= attention
        s *= attention
        cos_out[first : first + count] = c
        sin_out[first : first + count] = s


def take(key: RotaryKey, positions: NDArray[np.int64]) -> Rows:
    """The rows at ``positions``, bit-identical to those rows of the whole table."""
    out = np.empty((len(positions), key.width), dtype=key.dtype)
    if _direct(key):
        w_hi, w_lo = frequencies(key)
        cos_half, sin_half = halves(key, out)
        _exact.take(positions, w_hi, w_lo, (_first(key, sin_half), _first(key, cos_half)))
    else:
        _write(key, positions, out)
    _mirror(key, out)
    engines.stored(out, key.cache_dtype)
    return out


def bound(key: RotaryKey) -> Bound:
    """Cosines and sines times the attention factor; the scaling's parameters share the
    blame for entries past it."""
    # the names a client gives (not the derived ones: ext_factors, seq_len)
    named = tuple(name for name, _ in key.params if name in scalings.PARAMETERS[key.scaling])
    return Bound(abs(key.attention), ("scaling", *(named or ("base",))))


def preparation(key: RotaryKey) -> int:
    """The exact frequencies of llama3, yarn and longrope, once per key."""
    if key.rounding != "exact":
        return 0
    return scalings.preparation(key.scaling, key.base, key.rotary_dim, key.params)


def entries(key: RotaryKey, rows: Rows) -> Values:
    """What an audit compares of a row: each pair's cos and sin once (the other member of
    a pair repeats them)."""
    cos, sin = halves(key, rows)
    first = slice(0, key.pairs) if key.convention == "half" else slice(0, None, 2)
    return np.concatenate([cos[:, first], sin[:, first]], axis=1).astype(np.float64)


def turned(key: RotaryKey, at: NDArray[np.float32], inverse: NDArray[np.float32]) -> Values:
    """transformers' entries at float32 positions with these inverse frequencies: each
    pair's cos and sin once, stored as the key stores its table."""
    cos, sin = _rope_library.cos_sin(at, inverse, key.attention)
    values = np.concatenate([cos, sin], axis=1)
    engines.stored(values, key.cache_dtype)
    return values.astype(np.float64)


AUDIT: Final[Audit[RotaryKey]] = Audit(
    exact=replacing(rounding="exact", dtype="float64", cache_dtype="float32"),
    library=replacing(rounding="library", dtype="float32"),
    width=lambda key: 2 * key.pairs,
    entries=entries,
    largest=lambda key: 2 * key.attention,
    angles=Angles(
        pairs=lambda key: key.pairs,
        exact=lambda key: frequencies(key)[0],
        library=library_frequencies,
        turned=turned,
        attention=lambda key: key.attention,
        ulps=lambda key: scalings.rule_of(key.scaling).device_ulps,
    ),
)
FAMILY: Final = register(
    Family(
        "rotary",
        RotaryKey,
        fill,
        take,
        bound,
        preparation=preparation,
        arrays=("cos", "sin"),
        audit=AUDIT,
        engine=lambda key: key.rounding == "library",
    )
)
