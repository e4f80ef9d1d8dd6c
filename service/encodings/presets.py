"""Compatibility presets: the sinusoidal tables the libraries train with, each as its source
code computes it (column order, frequency rule, where positions start, zeroed rows and
columns, odd widths), with the library function it follows. ``vaswani`` is the paper's table.

A preset fixes a table's arrangement of columns:

- ``interleaved``: sin, cos, sin, ... (an odd width ends with a sine);
- ``split``: the ``ceil(d/2)`` sines, then the cosines (an odd width has one sine more);
- ``sin-cos`` / ``cos-sin``: ``d // 2`` sines and as many cosines, in that order, and a
  zero column last when the width is odd (or an odd width is refused).

Its frequencies are given exactly (``exact``: double-double, for ``rounding=exact``) and as
the library rounds them (``library``: ``_library``'s function; ``None`` where the library
computes in float64 and rounds once, which is the exact table).
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np

from service.encodings import _exact, _library
from service.errors import InvalidParameter

Arrangement = Literal["interleaved", "split", "sin-cos", "cos-sin"]
Odd = Literal["sin", "zero", "reject"]
Params = Mapping[str, Any]
Frequencies = tuple[_exact.Float64Array, _exact.Float64Array]
DEFAULT_BASE: Final = 10000.0
# The largest frequency served, radians a position: up to it, rounding=exact's angles are
# exact to 2^31 (below 2^35, the error term small^3 / 6 of an angle stays under 2e-18; at
# a frequency of 1e10 it was 2.8e14). Any past 2 pi aliases at integer positions anyway;
# mlx with full_turns and max_freq 2 (4 pi) is a configuration its tests use.
MAX_FREQUENCY: Final = 16.0
_TAU: Final = decimal.Decimal("6.283185307179586476925286766559005768394")


@dataclass(frozen=True, slots=True)
class Source:
    """A library function a preset follows."""

    repository: str
    path: str
    function: str


@dataclass(frozen=True, slots=True)
class Param:
    """A preset's own parameter, by the library's name for it: its type and the range it is
    served in, its default and what ``GET /v1/presets`` says of it, and the text of its query
    field (after the names of the presets that take it, which the catalogue gives)."""

    name: str
    kind: type[float] | type[int] | type[bool]
    default: float | int | bool | None  # None: computed from d_model (mlx's scale)
    description: str
    query: str | None  # None: the family's queries declare it (base, scale)
    ge: float | None = None
    gt: float | None = None
    le: float | None = None


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    summary: str
    sources: tuple[Source, ...]
    models: str
    formula: str
    arrangement: Arrangement | None  # None: the client's layout (vaswani)
    odd: Odd
    min_d: int
    exact: Callable[[int, Params], Frequencies]
    library: Callable[..., _library.Angles] | None
    params: tuple[Param, ...] = ()
    embed_scale: Literal["sqrt(d_model)", "1"] = "1"  # what the library multiplies X by
    positions: str = "row r is position r"
    shift: str | None = None  # the parameter added to every position (start_index)
    zero_row: str | None = None  # the parameter naming a zeroed row (padding_idx)
    scale: str | None = None  # the parameter the table is multiplied by (mlx)
    first_row: Callable[[Params], int] = field(default=lambda params: 0)
    # the largest frequency the parameters give (radians a position), those parameters, and
    # the formula GET /v1/presets writes, where they can pass MAX_FREQUENCY; the other rules
    # keep every frequency at most 1
    frequency: Callable[[Params], float] | None = None
    frequency_parameters: tuple[str, ...] = ()
    frequency_formula: str = ""
    # what the library computes in, where it has its own arithmetic (float64: rounded to
    # float32 once at the end)
    computes_in: Literal["float32", "float64"] = "float32"
    # whether the library computes with torch: its float32 exp, pow, sin and cos are then
    # the library engine's (:mod:`.kernels`), torch's own with the torch engine
    torch: bool = False
    # other names a client may give it: the models that use it, where no other preset's
    aliases: tuple[str, ...] = ()

    def sines(self, d: int) -> int:
        """How many sine columns (and frequencies) a width-``d`` table has."""
        return (d + 1) // 2 if self.odd == "sin" else d // 2


def check(preset: Preset, params: Params, dtype: str) -> None:
    """That the parameters keep the table where ``rounding=exact`` keeps its promise (every
    frequency at most :data:`MAX_FREQUENCY`) and its dtype holds it (the scale at most the
    dtype's largest number): else an :class:`InvalidParameter` naming them all."""
    if preset.frequency is not None:
        largest = preset.frequency(params)
        if not largest <= MAX_FREQUENCY:
            raise InvalidParameter(
                preset.frequency_parameters[0],
                f"these give preset {preset.name} a largest frequency of {largest:.6g} "
                f"radians a position; at most {MAX_FREQUENCY:g} is served: past it exact "
                "angles lose their accuracy at large positions (and any frequency past 2 pi "
                "turns more than once between positions)",
                also=preset.frequency_parameters[1:],
            )
    if preset.scale is not None:
        scale = abs(float(params[preset.scale]))
        largest_number = float(np.finfo(dtype).max)
        if not scale <= largest_number:
            raise InvalidParameter(
                preset.scale,
                f"{scale:g} is more than {dtype} holds (at most {largest_number:g}): the "
                "table's entries reach the scale; lower it or ask for a wider dtype",
                also=("dtype",),
            )


def arrangement(preset: Preset, params: Params) -> Arrangement:
    """The arrangement a preset's table has with these parameters."""
    if preset.name == "mlx" and params["cos_first"]:
        return "cos-sin"
    return preset.arrangement or "interleaved"


def powers(base_param: str, denominator: Callable[[int], int]) -> Callable[[int, Params], Any]:
    """``base^(-2k / denominator(d))`` for every sine column ``k``."""

    def frequencies(d: int, params: Params) -> Frequencies:
        count = (d + 1) // 2
        return _exact.inverse_powers(params[base_param], denominator(d), count)

    return frequencies


def halves(d: int, params: Params) -> Frequencies:
    """``base^(-k / (n - 1))``, ``n = d // 2`` (fairseq's ``exp(-k ln(base) / (n - 1))``)."""
    n = d // 2
    return _exact.inverse_powers(params["base"], 2 * (n - 1), n)


def timescales(d: int, params: Params) -> Frequencies:
    """``min_ts (max_ts / min_ts)^(-k / max(n - 1, 1))``."""
    n = d // 2
    low, high = params["min_timescale"], params["max_timescale"]
    hi, lo = _exact.inverse_powers(high, 2 * max(n - 1, 1), n, divisor=low)
    return _exact.scaled(hi, lo, decimal.Decimal(low))


def frequency_range(d: int, params: Params) -> Frequencies:
    """``max_freq (max_freq / min_freq)^(-k / (n - 1))``, times 2 pi with ``full_turns``."""
    n = d // 2
    low, high = params["min_freq"], params["max_freq"]
    hi, lo = _exact.inverse_powers(high, 2 * max(n - 1, 1), n, divisor=low)
    turns = _TAU if params["full_turns"] else decimal.Decimal(1)
    factor = decimal.Context(prec=40).multiply(decimal.Decimal(high), turns)
    return _exact.scaled(hi, lo, factor)


def resolve(
    preset: Preset, given: Mapping[str, Any], layout: str | None, d_model: int
) -> tuple[float, Arrangement, tuple[tuple[str, Any], ...]]:
    """The ``base``, arrangement and other parameters (defaults filled in) of a table of
    ``preset`` from the parameters a client gave (``None``: not given). A parameter the
    preset does not take, or a layout it fixes, is an :class:`InvalidParameter`."""
    own = {param.name: param for param in preset.params}
    for name, value in given.items():
        if value is not None and name not in own:
            takes = ", ".join(own) or "none"
            raise InvalidParameter(
                name, f"does not apply to preset {preset.name} (its parameters: {takes})"
            )
    if layout is not None and preset.arrangement is not None:
        raise InvalidParameter(
            "layout", f"is fixed by preset {preset.name} ({preset.arrangement}): leave it out"
        )
    values: dict[str, Any] = {
        name: param.default if given.get(name) is None else given[name]
        for name, param in own.items()
    }
    if preset.scale is not None and values[preset.scale] is None:
        values[preset.scale] = math.sqrt(2 / d_model)
    base = float(values.pop("base", DEFAULT_BASE))
    chosen: Arrangement = (
        arrangement(preset, values)
        if preset.arrangement
        else ("split" if layout == "split" else "interleaved")
    )
    return base, chosen, tuple(values.items())
