"""The sinusoidal encoding of "Attention Is All You Need", in numpy only.

    PE[pos, 2i]   = sin(pos / base^(2i / d_model))
    PE[pos, 2i+1] = cos(pos / base^(2i / d_model))

Column ``k`` uses ``i = k // 2``, so an odd ``d_model`` is well defined (its last column is
a sine). Every entry is computed in float64 from an exact angle (``_exact``) and rounded
once to the table's dtype: float64 tables are within a few units in the last place of the
true value and float32 tables within half a float32 ulp, at every position up to 2^31.
A row depends on its position only, so any rows can be computed on their own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from service.encodings import _exact, _library, kernels, presets
from service.encodings.catalogue import PRESETS
from service.encodings.registry import (
    DTYPES,
    ROUNDINGS,
    Audit,
    Bound,
    DType,
    Family,
    Rounding,
    Rows,
    register,
    replacing,
)
from service.errors import InvalidParameter

Layout = Literal["interleaved", "split"]
LAYOUTS: Final[tuple[Layout, ...]] = get_args(Layout)
DEFAULT_BASE: Final = 10000.0
# rows computed at a time where float64 temporaries are needed (library, scaled tables)
_CHUNK_ELEMENTS: Final = 1 << 16


@dataclass(frozen=True, slots=True)
class SinusoidalKey:
    """Everything that changes a sinusoidal table's values: its width, its preset (the
    paper's, or a library's) with the preset's parameters, the rounding, and the dtype.
    ``base`` is the preset's ``base`` where it has one; its other parameters are ``params``
    (name, value) in the preset's order, defaults filled in; ``layout`` is the preset's
    arrangement of columns (the client's choice for ``vaswani``)."""

    d_model: int
    base: float = DEFAULT_BASE
    layout: presets.Arrangement = "interleaved"
    dtype: DType = "float32"
    preset: str = "vaswani"
    rounding: Rounding = "exact"
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.d_model < 1:
            raise InvalidParameter("d_model", "must be a positive integer")
        if not (math.isfinite(self.base) and self.base > 1):
            raise InvalidParameter("base", "must be a finite number greater than 1")
        if self.preset not in PRESETS:
            raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
        if self.layout not in get_args(presets.Arrangement):
            raise InvalidParameter("layout", f"must be one of {', '.join(LAYOUTS)}")
        if self.dtype not in DTYPES:
            raise InvalidParameter("dtype", f"must be one of {', '.join(DTYPES)}")
        if self.rounding not in ROUNDINGS:
            raise InvalidParameter("rounding", f"must be one of {', '.join(ROUNDINGS)}")
        preset = PRESETS[self.preset]
        if self.d_model < preset.min_d:
            raise InvalidParameter(
                "d_model", f"must be at least {preset.min_d} for preset {self.preset}"
            )
        if preset.odd == "reject" and self.d_model % 2:
            raise InvalidParameter(
                "d_model",
                f"must be even for preset {self.preset}: {preset.sources[0].function} "
                "has no odd widths",
            )
        presets.check(preset, self.settings, self.dtype)

    @property
    def width(self) -> int:
        return self.d_model

    @property
    def pairs(self) -> int:
        """Frequencies: one per sine column."""
        return PRESETS[self.preset].sines(self.d_model)

    def query(self) -> dict[str, Any]:
        """The key as a request's parameters say it (what the Python client sends)."""
        preset = PRESETS[self.preset]
        fields: dict[str, Any] = {"d_model": self.d_model, "dtype": self.dtype}
        if self.preset == "vaswani":
            return {**fields, "base": self.base, "layout": self.layout}
        named = {param.name for param in preset.params}
        return {
            **fields,
            "preset": self.preset,
            "rounding": self.rounding,
            **({"base": self.base} if "base" in named else {}),
            **dict(self.params),
        }

    @property
    def shift(self) -> int:
        """What the preset adds to a row's index to get its position (``start_index``)."""
        name = PRESETS[self.preset].shift
        return int(self.settings[name]) if name else 0

    @property
    def settings(self) -> dict[str, Any]:
        """The preset's parameters by name, ``base`` among them."""
        return {"base": self.base, **dict(self.params)}


def preset_key(
    d_model: int,
    dtype: DType,
    preset: str,
    rounding: Rounding,
    given: Mapping[str, Any],
    layout: str | None,
) -> SinusoidalKey:
    """The key of ``preset``'s table of width ``d_model`` from the parameters a client gave
    (``None``: not given): a parameter the preset does not take, a layout it fixes or a
    width it refuses is an :class:`InvalidParameter`. ``vaswani``'s roundings are one
    table (its library computes in float64 and rounds once)."""
    if preset not in PRESETS:
        raise InvalidParameter("preset", f"must be one of {', '.join(PRESETS)}")
    chosen = PRESETS[preset]
    if d_model < chosen.min_d or (chosen.odd == "reject" and d_model % 2):
        SinusoidalKey(d_model, preset=preset)  # raises, saying which rule the width breaks
    base, arrangement, params = presets.resolve(chosen, given, layout, d_model)
    rounding = rounding if chosen.library is not None else "exact"
    return SinusoidalKey(d_model, base, arrangement, dtype, preset, rounding, params)


def frequencies(key: SinusoidalKey) -> tuple[_exact.Float64Array, _exact.Float64Array]:
    """The exact frequencies of the sine columns, double-double."""
    hi, lo = PRESETS[key.preset].exact(key.d_model, key.settings)
    return hi[: key.pairs], lo[: key.pairs]


def _columns(key: SinusoidalKey, out: Rows) -> _exact.Target:
    """The sine and cosine columns of ``out`` in the key's arrangement."""
    n = key.pairs
    if key.layout == "interleaved":
        return out[:, 0::2], out[:, 1::2]
    if key.layout == "split":
        return out[:, :n], out[:, n:]
    if key.layout == "sin-cos":
        return out[:, :n], out[:, n : 2 * n]
    return out[:, n : 2 * n], out[:, :n]


def _finish(key: SinusoidalKey, positions: NDArray[np.int64], out: Rows) -> None:
    """The preset's zeros in the rows of ``positions``: the column after the pairs of an
    odd width, and the padding row."""
    zero_row = PRESETS[key.preset].zero_row
    if key.layout in ("sin-cos", "cos-sin") and key.d_model % 2:
        out[:, -1] = 0
    if zero_row is not None:
        out[positions == int(key.settings[zero_row])] = 0


def _write(key: SinusoidalKey, positions: NDArray[np.int64], out: Rows) -> None:
    """Rows of ``positions`` into ``out`` where exact angles alone are not the table: the
    library's own arithmetic, or an exact table times a scale (rounded once)."""
    preset = PRESETS[key.preset]
    settings = key.settings
    shift = key.shift
    scale = settings[preset.scale] if preset.scale else 1.0
    sines, cosines = _columns(key, out)
    library = preset.library if key.rounding == "library" else None
    w_hi, w_lo = frequencies(key) if library is None else (None, None)
    rows = max(1, _CHUNK_ELEMENTS // key.d_model)
    s: NDArray[np.floating]
    c: NDArray[np.floating]
    for first in range(0, len(positions), rows):
        part = positions[first : first + rows] + shift
        if library is not None:
            angles = library(part, key.d_model, settings)[:, : key.pairs]
            s, c = (
                (kernels.sin(angles), kernels.cos(angles))
                if preset.torch
                else _library.sincos(angles)
            )
            if scale != 1:
                s, c = s * np.float32(scale), c * np.float32(scale)
        else:
            assert w_hi is not None
            assert w_lo is not None
            s, c = np.empty((len(part), key.pairs)), np.empty((len(part), key.pairs))
            _exact.take(part, w_hi, w_lo, (s, c))
            s, c = s * scale, c * scale
        sines[first : first + len(part)] = s
        cosines[first : first + len(part)] = c[:, : cosines.shape[1]]


def _direct(key: SinusoidalKey) -> bool:
    """Whether the table is exact angles written as they are (the fast, blocked path)."""
    preset = PRESETS[key.preset]
    library = key.rounding == "library" and preset.library is not None
    return not library and preset.scale is None


def fill(key: SinusoidalKey, start: int, out: Sequence[Rows]) -> None:
    """Rows ``start, start+1, ...`` written into the arrays ``out``, one after the other."""
    direct = _direct(key)
    if direct:
        w_hi, w_lo = frequencies(key)
        _exact.fill(start + key.shift, w_hi, w_lo, [_columns(key, part) for part in out])
    first = start
    for part in out:
        positions = np.arange(first, first + len(part), dtype=np.int64)
        if not direct:
            spans = _exact.row_spans(len(part), key.d_model)
            jobs = [functools.partial(_write, key, positions[a:b], part[a:b]) for a, b in spans]
            _exact.in_parallel(jobs)
        _finish(key, positions, part)
        first += len(part)


def take(key: SinusoidalKey, positions: NDArray[np.int64]) -> Rows:
    """The rows at ``positions``, bit-identical to those rows of the whole table."""
    out = np.empty((len(positions), key.d_model), dtype=key.dtype)
    if _direct(key):
        w_hi, w_lo = frequencies(key)
        _exact.take(positions + key.shift, w_hi, w_lo, _columns(key, out))
    else:
        _write(key, positions, out)
    _finish(key, positions, out)
    return out


def similarity(start: int, stop: int, step: int, key: SinusoidalKey) -> _exact.Float64Array:
    """The dot products ``PE[p] . PE[q]`` for ``p, q`` in ``range(start, stop, step)``, in
    float64 from exact angles: a square, symmetric matrix. The layout only orders the
    columns and the dtype is not used: neither changes the result.

    A sine-cosine pair contributes ``sin(pw)sin(qw) + cos(pw)cos(qw) = cos((p-q)w)``, so
    the sum over pairs depends on ``p - q`` alone and is computed once per distance; an odd
    ``d_model``'s last column (a sine without its cosine) adds ``sin(pw)sin(qw)``.
    """
    if not 0 <= start < stop:
        raise InvalidParameter("stop", "rows must satisfy 0 <= start < stop")
    if step < 1:
        raise InvalidParameter("step", "must be a positive integer")
    w_hi, w_lo = frequencies(key)
    pairs = key.d_model // 2
    count = len(range(start, stop, step))
    by_distance = np.zeros(count)
    if pairs:
        rows = max(1, _exact.CHUNK_ELEMENTS // pairs)
        for first in range(0, count, rows):
            distances = np.arange(first, min(first + rows, count), dtype=np.float64) * step
            _, c = _exact.sincos(distances, w_hi[:pairs], w_lo[:pairs])
            by_distance[first : first + len(distances)] = c.sum(axis=1)
    # row j is by_distance[|j - l|] for every l: a window onto the mirrored distances
    mirrored = np.concatenate([by_distance[::-1], by_distance[1:]])
    matrix = np.lib.stride_tricks.sliding_window_view(mirrored, count)[::-1]
    if key.d_model % 2 == 0:
        return np.ascontiguousarray(matrix)
    positions = np.arange(start, stop, step, dtype=np.float64)
    s, _ = _exact.sincos(positions, w_hi[pairs:], w_lo[pairs:])
    return matrix + s * s.T


def bound(key: SinusoidalKey) -> Bound:
    """Entries are sines and cosines, times the preset's scale (mlx); the parameters that
    set the frequencies and the scale share the blame for any that are not."""
    preset = PRESETS[key.preset]
    scale = abs(float(key.settings[preset.scale])) if preset.scale else 1.0
    named = tuple(
        param.name
        for param in preset.params
        if param.name not in (preset.shift, preset.zero_row, "cos_first")
    )
    return Bound(scale, named)


# an audit compares each row as it is
AUDIT: Final[Audit[SinusoidalKey]] = Audit(
    exact=replacing(rounding="exact", dtype="float64"),
    library=replacing(rounding="library", dtype="float32"),
)


def engine(key: SinusoidalKey) -> bool:
    """Whether the key's table is computed with the library engine's functions: the
    library path of a preset whose library is torch."""
    return key.rounding == "library" and PRESETS[key.preset].torch


FAMILY: Final = register(
    Family(
        "sinusoidal",
        SinusoidalKey,
        fill,
        take,
        bound,
        lambda key: key.shift,
        audit=AUDIT,
        engine=engine,
    )
)
