"""The computation paths an audit measures against the exact table, per family.

Each path gives, at positions, the entries a model would see along it, as float64 (the
rotary family: each pair's cos and sin once; a sinusoidal table: its row), beside the exact
table's (``rounding=exact`` in float64). The rotary paths follow transformers' operation
order (``LlamaRotaryEmbedding.forward``: ``position_ids.float()`` times the float32
``inv_freq``, cos and sin of that float32 angle, times the attention factor):

- ``library``: that arithmetic, the service's ``library`` table;
- ``bf16-table``, ``fp16-table``: the library's table stored in the model's dtype, rounded to
  nearest even, which attention then reads (``cos.to(x.dtype)``);
- ``float32-positions``, ``bf16-positions``, ``fp16-positions``: the position ids cast to
  that dtype before the product (float32 loses integers past 2^24, bfloat16 past 256,
  float16 past 2048 and holds none past 65504);
- ``bf16-frequencies``: the inverse frequencies cast to bfloat16 before the product;
- ``tf32-angles``: the product's inputs rounded to TF32 (a 10-bit mantissa), as a TF32 GEMM
  rounds them, the product accumulated in float32;
- ``device``: not a table, an envelope (:mod:`.envelope`).

A sinusoidal table's paths are ``library``, the tables stored in bfloat16 and float16, and
the preset's rows at positions cast to float32, bfloat16 and float16. ALiBi's bias is
audited by distance: each head's entry is its slope times the distance (BLOOM's float32
slopes and product for ``library``), the same paths.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.encodings import _exact, _rope_library, alibi, engines, registry, rotary
from service.encodings.alibi import BiasKey
from service.encodings.registry import Key
from service.encodings.rotary import RotaryKey

Values = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Path:
    """A path: its name, what it is (and its source), and its entries at positions."""

    name: str
    description: str
    values: Callable[[Key, NDArray[np.int64]], Values]


def exact_key(key: Key) -> Key:
    """The key of the exact table, in float64, no cache rounding."""
    changes: dict[str, Any] = {"rounding": "exact", "dtype": "float64"}
    if isinstance(key, RotaryKey):
        changes["cache_dtype"] = "float32"
    return dataclasses.replace(key, **changes)


def library_key(key: Key) -> Key:
    return dataclasses.replace(key, rounding="library", dtype="float32")


def entries(key: Key, rows: NDArray[Any]) -> Values:
    """What a path's entries are compared by: a rotary row's cos and sin of each pair once
    (the other member of a pair repeats them); a table's row."""
    if not isinstance(key, RotaryKey):
        return np.asarray(rows, np.float64)
    cos, sin = rotary.halves(key, rows)
    first = slice(0, key.pairs) if key.convention == "half" else slice(0, None, 2)
    return np.concatenate([cos[:, first], sin[:, first]], axis=1).astype(np.float64)


def width(key: Key) -> int:
    """How many entries a position has in an audit."""
    if isinstance(key, BiasKey):
        return key.num_heads
    return 2 * key.pairs if isinstance(key, RotaryKey) else key.width


def exact(key: Key, positions: NDArray[np.int64]) -> Values:
    """The exact entries at ``positions`` (ALiBi: each head's slope times the distance)."""
    if isinstance(key, BiasKey):
        hi, lo = alibi.exact_slopes(key.num_heads)
        p_hi, p_lo = _exact.dd_mul(
            hi[None, :], lo[None, :], positions.astype(np.float64)[:, None], 0.0
        )
        return p_hi + p_lo
    reference = exact_key(key)
    return entries(key, registry.take(reference, positions))


def _alibi(key: BiasKey, distances: NDArray[np.float64]) -> Values:
    """BLOOM's bias magnitudes: the float32 slopes times float32 distances, in float32."""
    slopes = alibi.library_slopes(key.num_heads)
    with np.errstate(invalid="ignore", over="ignore"):
        product = distances.astype(np.float32)[:, None] * slopes[None, :]
    return product.astype(np.float64)


def _library_table(key: Key, positions: NDArray[np.int64]) -> NDArray[Any]:
    if isinstance(key, BiasKey):
        return _alibi(key, positions.astype(np.float64)).astype(np.float32)
    return registry.take(library_key(key), positions)


def _library(key: Key, positions: NDArray[np.int64]) -> Values:
    table = _library_table(key, positions)
    return table.astype(np.float64) if isinstance(key, BiasKey) else entries(key, table)


def _stored(dtype: engines.CacheDType) -> Callable[[Key, NDArray[np.int64]], Values]:
    def values(key: Key, positions: NDArray[np.int64]) -> Values:
        table = _library_table(key, positions).astype(np.float32)
        if dtype == "float16":  # past 65504: infinite, as .to(torch.float16) makes it
            with np.errstate(over="ignore"):
                table = table.astype(np.float16).astype(np.float32)
        else:
            engines.stored(table, dtype)
        return table.astype(np.float64) if isinstance(key, BiasKey) else entries(key, table)

    return values


def cast(positions: NDArray[np.int64], dtype: str) -> NDArray[np.float64]:
    """Position ids cast to ``dtype`` (to nearest, ties to even): float16 past its largest
    finite value is infinite."""
    wide = positions.astype(np.float64)
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return wide.astype(np.float16).astype(np.float64)
    narrow = wide.astype(np.float32)
    if dtype == "bfloat16":
        engines.stored(narrow, "bfloat16")
    return narrow.astype(np.float64)


def _tf32(values: NDArray[np.float32]) -> NDArray[np.float32]:
    """float32 values rounded to TF32's 10-bit mantissa, to nearest, ties to even."""
    bits = values.astype(np.float32).view(np.uint32)
    bits = bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))
    rounded: NDArray[np.float32] = (bits & np.uint32(0xFFFFE000)).view(np.float32)
    return rounded


def _turned(
    key: RotaryKey, positions: NDArray[np.float64], inverse: NDArray[np.float32], tf32: bool = False
) -> Values:
    """transformers' rows at (cast) positions with these inverse frequencies: each pair's
    cos and sin once, stored as the key stores its table."""
    at = positions.astype(np.float32)
    if tf32:
        at, inverse = _tf32(at), _tf32(inverse)
    with np.errstate(invalid="ignore", over="ignore"):  # an infinite position: NaN
        cos, sin = _rope_library.cos_sin(at, inverse, key.attention)
    values = np.concatenate([cos, sin], axis=1)
    engines.stored(values, key.cache_dtype)
    return values.astype(np.float64)


def _positions(dtype: str) -> Callable[[Key, NDArray[np.int64]], Values]:
    def values(key: Key, positions: NDArray[np.int64]) -> Values:
        if isinstance(key, BiasKey):
            return _alibi(key, cast(positions, dtype))
        if isinstance(key, RotaryKey):
            inverse = rotary.library_frequencies(library_key(key))
            return _turned(key, cast(positions, dtype), inverse)
        moved = cast(positions, dtype)
        finite = np.isfinite(moved)
        out = np.full((len(positions), key.width), np.nan)
        if finite.any():
            rows = registry.take(library_key(key), moved[finite].astype(np.int64))
            out[finite] = entries(key, rows)
        return out

    return values


def _bf16_frequencies(key: Key, positions: NDArray[np.int64]) -> Values:
    assert isinstance(key, RotaryKey)
    inverse = rotary.library_frequencies(library_key(key)).copy()
    engines.stored(inverse, "bfloat16")
    return _turned(key, positions.astype(np.float64), inverse)


def _tf32_angles(key: Key, positions: NDArray[np.int64]) -> Values:
    assert isinstance(key, RotaryKey)
    inverse = rotary.library_frequencies(library_key(key))
    return _turned(key, positions.astype(np.float64), inverse, tf32=True)


_TABLE: Final = "transformers' float32 arithmetic (the service's rounding=library table)"
COMMON: Final = (
    Path("library", f"{_TABLE}.", _library),
    Path(
        "bf16-table",
        "The library's table stored in bfloat16, rounded to nearest even, as attention in a "
        "bf16 model reads it (cos.to(x.dtype); a bf16 cache, as vLLM's).",
        _stored("bfloat16"),
    ),
    Path(
        "fp16-table",
        "The library's table stored in float16, rounded to nearest even.",
        _stored("float16"),
    ),
    Path(
        "float32-positions",
        "Position ids cast to float32 before the product (position_ids.float()): integers "
        "past 2^24 are rounded.",
        _positions("float32"),
    ),
    Path(
        "bf16-positions",
        "Position ids cast to bfloat16 before the product: integers past 256 are rounded.",
        _positions("bfloat16"),
    ),
    Path(
        "fp16-positions",
        "Position ids cast to float16 before the product: integers past 2048 are rounded, "
        "past 65504 infinite (the entries NaN: error counted as the largest).",
        _positions("float16"),
    ),
)
ROTARY: Final = (
    Path(
        "bf16-frequencies",
        "The inverse frequencies cast to bfloat16 before the product (inv_freq in a bf16 "
        "module's buffers).",
        _bf16_frequencies,
    ),
    Path(
        "tf32-angles",
        "The product's inputs rounded to TF32 (10-bit mantissa, to nearest even), as a TF32 "
        "GEMM computes positions @ inv_freq, accumulated in float32.",
        _tf32_angles,
    ),
)


def paths_of(key: Key) -> tuple[Path, ...]:
    """The paths that mean something for ``key``'s family."""
    return COMMON + ROTARY if isinstance(key, RotaryKey) else COMMON
