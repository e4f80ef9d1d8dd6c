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

What a family is to the audit (its exact and library keys, its entries, whether they are
turned pairs, the shared paths it keeps and its own) is its record,
:class:`service.encodings.registry.Audit`: the paths read the record, never the key's type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from service.encodings import engines, registry
from service.encodings.registry import Angles, AuditPath, Key, Values

Path = AuditPath[Any]


def exact_key(key: Key) -> Key:
    """The key of the exact table, in float64, no cache rounding."""
    return registry.audit(key).exact(key)


def library_key(key: Key) -> Key:
    return registry.audit(key).library(key)


def angles(key: Key) -> Angles[Any] | None:
    """How ``key``'s entries turn, for a family of turned pairs (RoPE)."""
    return registry.audit(key).angles


def entries(key: Key, rows: NDArray[Any]) -> Values:
    """What a path's entries are compared by: a rotary row's cos and sin of each pair once
    (the other member of a pair repeats them); a table's row."""
    return registry.audit(key).entries(key, rows)


def width(key: Key) -> int:
    """How many entries a position has in an audit."""
    return registry.audit(key).width(key)


def extent(key: Key, max_len: int) -> int:
    """How many positions (0 .. extent-1) the audit of ``key``'s table of ``max_len`` rows
    covers."""
    return registry.audit(key).extent(key, max_len)


def exact(key: Key, positions: NDArray[np.int64]) -> Values:
    """The exact entries at ``positions`` (ALiBi: each head's slope times the distance)."""
    record = registry.audit(key)
    if record.exact_at is not None:
        return record.exact_at(key, positions)
    return entries(key, registry.take(exact_key(key), positions))


def _library_table(key: Key, positions: NDArray[np.int64]) -> NDArray[Any]:
    record = registry.audit(key)
    if record.library_at is not None:
        return record.library_at(key, positions.astype(np.float64)).astype(np.float32)
    return registry.take(library_key(key), positions)


def _library(key: Key, positions: NDArray[np.int64]) -> Values:
    return entries(key, _library_table(key, positions))


def _stored(dtype: engines.CacheDType) -> Callable[[Key, NDArray[np.int64]], Values]:
    def values(key: Key, positions: NDArray[np.int64]) -> Values:
        table = _library_table(key, positions).astype(np.float32)
        if dtype == "float16":  # past 65504: infinite, as .to(torch.float16) makes it
            with np.errstate(over="ignore"):
                table = table.astype(np.float16).astype(np.float32)
        else:
            engines.stored(table, dtype)
        return entries(key, table)

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
    key: Key, positions: NDArray[np.float64], inverse: NDArray[np.float32], tf32: bool = False
) -> Values:
    """The library's entries at (cast) positions with these inverse frequencies: each
    pair's cos and sin once, stored as the key stores its table."""
    turning = angles(key)
    assert turning is not None
    at = positions.astype(np.float32)
    if tf32:
        at, inverse = _tf32(at), _tf32(inverse)
    with np.errstate(invalid="ignore", over="ignore"):  # an infinite position: NaN
        return turning.turned(key, at, inverse)


def _library_frequencies(key: Key) -> NDArray[np.float32]:
    turning = angles(key)
    assert turning is not None
    return turning.library(library_key(key))


def _positions(dtype: str) -> Callable[[Key, NDArray[np.int64]], Values]:
    def values(key: Key, positions: NDArray[np.int64]) -> Values:
        record, moved = registry.audit(key), cast(positions, dtype)
        if record.angles is not None:
            return _turned(key, moved, _library_frequencies(key))
        if record.library_at is not None:
            return record.library_at(key, moved)
        finite = np.isfinite(moved)
        out = np.full((len(positions), record.width(key)), np.nan)
        if finite.any():
            rows = registry.take(library_key(key), moved[finite].astype(np.int64))
            out[finite] = entries(key, rows)
        return out

    return values


def _bf16_frequencies(key: Key, positions: NDArray[np.int64]) -> Values:
    inverse = _library_frequencies(key).copy()
    engines.stored(inverse, "bfloat16")
    return _turned(key, positions.astype(np.float64), inverse)


def _tf32_angles(key: Key, positions: NDArray[np.int64]) -> Values:
    return _turned(key, positions.astype(np.float64), _library_frequencies(key), tf32=True)


_TABLE: Final = "transformers' float32 arithmetic (the service's rounding=library table)"
COMMON: Final[tuple[Path, ...]] = (
    AuditPath("library", f"{_TABLE}.", _library),
    AuditPath(
        "bf16-table",
        "The library's table stored in bfloat16, rounded to nearest even, as attention in a "
        "bf16 model reads it (cos.to(x.dtype); a bf16 cache, as vLLM's).",
        _stored("bfloat16"),
    ),
    AuditPath(
        "fp16-table",
        "The library's table stored in float16, rounded to nearest even.",
        _stored("float16"),
    ),
    AuditPath(
        "float32-positions",
        "Position ids cast to float32 before the product (position_ids.float()): integers "
        "past 2^24 are rounded.",
        _positions("float32"),
    ),
    AuditPath(
        "bf16-positions",
        "Position ids cast to bfloat16 before the product: integers past 256 are rounded.",
        _positions("bfloat16"),
    ),
    AuditPath(
        "fp16-positions",
        "Position ids cast to float16 before the product: integers past 2048 are rounded, "
        "past 65504 infinite (the entries NaN: error counted as the largest).",
        _positions("float16"),
    ),
)
# the paths of turned pairs (:attr:`registry.Audit.angles`)
ANGLES: Final[tuple[Path, ...]] = (
    AuditPath(
        "bf16-frequencies",
        "The inverse frequencies cast to bfloat16 before the product (inv_freq in a bf16 "
        "module's buffers).",
        _bf16_frequencies,
    ),
    AuditPath(
        "tf32-angles",
        "The product's inputs rounded to TF32 (10-bit mantissa, to nearest even), as a TF32 "
        "GEMM computes positions @ inv_freq, accumulated in float32.",
        _tf32_angles,
    ),
)


def paths_of(key: Key) -> tuple[Path, ...]:
    """The paths that mean something for ``key``'s family: the shared ones its entries
    allow (and it keeps), each replaced by its own path of the same name (its library's
    arithmetic, described as its own), then its other own paths."""
    return paths_in(registry.audit(key))


def paths_in(record: registry.Audit[Any]) -> tuple[Path, ...]:
    """:func:`paths_of` a family's audit record."""
    shared = COMMON + ANGLES if record.angles is not None else COMMON
    own = {path.name: path for path in record.own}
    kept = [
        own.pop(path.name, path)
        for path in shared
        if record.paths is None or path.name in record.paths
    ]
    return (*kept, *own.values())
