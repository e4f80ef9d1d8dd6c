"""The arithmetic of sin-cos grid tables (MAE's, diffusers', timm's 2-D and 3-D tables):
each axis of a grid has its positions (an integer index, divided by what the code divides
it by) and its frequencies ``temperature^(-k / count)``, ``k < count``; a token's row is
sines and cosines of each axis's angles, in the blocks its code lays them out in.

``library``: float64 arithmetic as numpy and diffusers' ``get_1d_sincos_pos_embed_from_grid``
compute it (float32 positions, ``omega = 1 / temperature ** (arange(count) / count)`` in
float64, the angles, sin and cos in float64, one rounding to the answer's dtype at the
end), or timm's float32 (``bands = 1 / temperature ** (arange(count) / count)`` and the
angles each rounded to float32; pow, sin and cos correctly rounded where torch's are
within an ulp). ``exact``: the positions as real numbers (``index · base_size / (size ·
scale)``, to 2^-100), double-double frequencies (:mod:`service.encodings._exact`), each
entry rounded once.
"""

from __future__ import annotations

import dataclasses
import decimal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import NDArray

from service.encodings import _exact, _library
from service.encodings.registry import Audit, AuditPath, Rows, Values, replacing

F32 = np.float32
F64 = np.float64
# float64: numpy's and diffusers' (float32 positions, float64 angles, one cast at the end);
# float32: timm's, every step rounded to float32
Arithmetic = Literal["float64", "float32"]
Part = Literal["sin", "cos"]
# exact angles keep about a float64 ulp up to this many radians, as the sinusoidal family's
LARGEST_ANGLE: Final = 2.0**31
_CHUNK_ELEMENTS: Final = 1 << 16
_CONTEXT: Final = decimal.Context(prec=50)


@dataclass(frozen=True, slots=True)
class Axis:
    """One axis of a grid: position ``p = (offset + index) / d_1 / d_2 ...`` for the
    ``divisors`` (Python floats, as the code writes them: ``size / base_size``, then
    ``interpolation_scale``; each a float32 division in ``library``), ``count``
    frequencies of ``temperature``; ``exact``: the divisors' product as a real number
    (``size / base_size`` is not rounded there)."""

    offset: int
    divisors: tuple[float, ...]
    exact: decimal.Decimal
    count: int
    temperature: float

    def library_positions(self, index: NDArray[np.int64]) -> NDArray[np.float32]:
        """float32 positions: the index as float32, divided in float32 by each divisor."""
        p = (index + self.offset).astype(F32)
        with np.errstate(over="ignore", divide="ignore"):
            for divisor in self.divisors:
                p = p / _library.f32(divisor)
        return p

    def exact_positions(self, index: NDArray[np.int64]) -> tuple[NDArray[F64], NDArray[F64]]:
        """The real positions as double-doubles ``(hi, lo)``."""
        inverse_hi, inverse_lo = _exact.decimal_pair(_CONTEXT.divide(1, self.exact))
        return _exact.dd_mul(
            (index + self.offset).astype(F64), np.zeros(len(index)), inverse_hi, inverse_lo
        )

    def largest_position(self, size: int) -> float:
        """The largest real position of an axis of ``size`` indices."""
        return float(_CONTEXT.divide(self.offset + max(size - 1, 0), self.exact))


def divisors(
    size: int, base_size: float, scale: float
) -> tuple[tuple[float, ...], decimal.Decimal]:
    """diffusers' ``arange(size) / (size / base_size) / interpolation_scale``: its divisors,
    and their product as a real number."""
    real = _CONTEXT.multiply(
        _CONTEXT.divide(decimal.Decimal(size), decimal.Decimal(base_size)), decimal.Decimal(scale)
    )
    return (size / base_size, scale), real


def scaled(scale: float) -> tuple[tuple[float, ...], decimal.Decimal]:
    """``arange(size) / scale`` (diffusers' 3-D grids): one divisor."""
    return (scale,), decimal.Decimal(scale)


INTEGER: Final[tuple[tuple[float, ...], decimal.Decimal]] = ((), decimal.Decimal(1))


def _frequencies64(axis: Axis) -> NDArray[F64]:
    """``omega = arange(count) / count; 1.0 / temperature ** omega`` in float64."""
    omega = np.arange(axis.count, dtype=F64) / F64(axis.count)
    return 1.0 / np.power(F64(axis.temperature), omega)


def _frequencies32(axis: Axis) -> NDArray[F32]:
    """timm's ``freq_bands``: ``arange(count).float() / count``, ``1. / temperature **
    exp``, each step float32."""
    exponent = np.arange(axis.count).astype(F32) / F32(axis.count)
    return F32(1.0) / _library.pow32(_library.f32(axis.temperature), exponent)


def _dd_sincos(hi: NDArray[F64], lo: NDArray[F64]) -> tuple[NDArray[F64], NDArray[F64]]:
    """sin and cos of ``hi + lo`` (``|lo|`` within an ulp of ``hi``), to about a float64 ulp."""
    s, c = np.sin(hi), np.cos(hi)
    half = 0.5 * lo * lo
    return s + (lo * c - half * s), c - (lo * s + half * c)


def sincos(
    axis: Axis, index: NDArray[np.int64], arithmetic: Arithmetic, exact: bool
) -> tuple[NDArray[np.floating], NDArray[np.floating]]:
    """Sines and cosines of the axis's angles at ``index`` (``(N, count)`` each)."""
    if exact:
        w_hi, w_lo = _exact.inverse_powers(axis.temperature, 2 * axis.count, axis.count)
        p_hi, p_lo = axis.exact_positions(index)
        a_hi, a_lo = _exact.dd_mul(p_hi[:, None], p_lo[:, None], w_hi[None, :], w_lo[None, :])
        return _dd_sincos(a_hi, a_lo)
    positions = axis.library_positions(index)
    if arithmetic == "float32":
        with np.errstate(over="ignore", invalid="ignore"):
            return _library.sincos(positions[:, None] * _frequencies32(axis)[None, :])
    with np.errstate(over="ignore", invalid="ignore"):
        angles = positions.astype(F64)[:, None] * _frequencies64(axis)[None, :]
        return np.sin(angles), np.cos(angles)


def _axis_table(
    axis: Axis, index: NDArray[np.int64], arithmetic: Arithmetic, exact: bool, dtype: np.dtype[Any]
) -> tuple[NDArray[np.floating], NDArray[np.floating], NDArray[np.intp]]:
    """The sines and cosines of the distinct indices of one axis, rounded to ``dtype`` (as
    a table's entries are), computed in chunks; and where each index's row is."""
    needed, inverse = np.unique(index, return_inverse=True)
    sines = np.empty((len(needed), axis.count), dtype=dtype)
    cosines = np.empty_like(sines)
    step = max(1, _CHUNK_ELEMENTS // max(1, axis.count))
    for first in range(0, len(needed), step):
        rows = slice(first, first + step)
        sines[rows], cosines[rows] = sincos(axis, needed[rows], arithmetic, exact)
    return sines, cosines, inverse.reshape(-1)


def fill_rows(
    out: Rows,
    indices: Sequence[NDArray[np.int64]],
    axes: Sequence[Axis],
    layout: Sequence[tuple[int, Part]],
    arithmetic: Arithmetic,
    exact: bool,
) -> None:
    """``out[n]`` the row of the token whose index along axis ``a`` is ``indices[a][n]``:
    the blocks of ``layout`` (an axis's sines or cosines) side by side. An entry depends on
    one axis's index alone, so each axis's distinct indices are computed once and gathered
    into the rows, a chunk at a time (the same bits as computing every row)."""
    tables = [
        _axis_table(axis, index, arithmetic, exact, out.dtype)
        for axis, index in zip(axes, indices, strict=True)
    ]
    step = max(1, _CHUNK_ELEMENTS // max(1, out.shape[1]))
    for first in range(0, len(out), step):
        rows = slice(first, first + step)
        column = 0
        for a, part in layout:
            sines, cosines, inverse = tables[a]
            block = sines if part == "sin" else cosines
            out[rows, column : column + block.shape[1]] = block[inverse[rows]]
            column += block.shape[1]


def audit(along: Callable[[Any, NDArray[np.int64], Arithmetic], Rows]) -> Audit[Any]:
    """The audit record of a grid's table whose rows ``along`` computes in either
    arithmetic: its library's, the tables stored in bfloat16 and float16, and each
    arithmetic's own path (numpy's and diffusers' float64 against timm's float32), by token
    row."""

    def path(arithmetic: Arithmetic) -> Callable[[Any, NDArray[np.int64]], Values]:
        def values(key: Any, positions: NDArray[np.int64]) -> Values:
            library = dataclasses.replace(key, rounding="library", dtype="float32")
            return along(library, positions, arithmetic).astype(np.float64)

        return values

    return Audit(
        exact=replacing(rounding="exact", dtype="float64"),
        library=replacing(rounding="library", dtype="float32"),
        paths=("library", "bf16-table", "fp16-table"),
        own=(
            AuditPath(
                "float64-angles",
                "numpy's and diffusers' arithmetic (MAE, DiT, PixArt, SD3, CogVideoX): float32 "
                "positions, float64 frequencies, angles, sin and cos, one rounding at the end.",
                path("float64"),
            ),
            AuditPath(
                "float32-angles",
                "timm's arithmetic: frequencies and angles each rounded to float32, float32 "
                "sin and cos.",
                path("float32"),
            ),
        ),
    )
