"""Largest error of the served sinusoidal tables against 200-bit arithmetic (tests/oracle.py),
every entry of a block of rows near positions 10^6, 10^8 and 2^31 - 1 (``PE_MAX_POSITION``'s
ceiling), for both layouts and several widths and bases.

For float64 it prints the largest absolute error, in units of 2^-53 (an ulp of an entry in
[0.5, 1)) and in ulps of the entry itself (the largest over all entries, and over entries of
at least 0.5: the bound is absolute, so an entry near 0 is off by many of its own ulps). For
float32 it prints the largest error in float32 ulps of the entry. The promise (README,
"Exact."): float64 within 2^-51 = 4 x 2^-53, float32 the float64 entry rounded once.

.venv/bin/python bench/accuracy.py [rows]   (default 256 rows a block; about a minute)
"""

from __future__ import annotations

import sys
from itertools import product

import numpy as np

from service.encodings import registry
from service.encodings.registry import DType
from service.encodings.sinusoidal import LAYOUTS, Layout, SinusoidalKey
from service.settings import POSITION_CEILING
from tests import oracle

NEAR = (10**6, 10**8, POSITION_CEILING)
WIDTHS = (4, 64, 512, 1023)
BASES = (10000.0, 100.0, 500000.0)
U = 2.0**-53
# each dtype and the bits of its significand
PRECISIONS: tuple[tuple[DType, int], ...] = (("float64", 53), ("float32", 24))


def worst(d_model: int, base: float, layout: Layout, start: int, stop: int) -> tuple[float, ...]:
    """Of rows ``start .. stop-1``: float64's largest error, its largest in ulps of the entry,
    the same over entries of at least 0.5, and float32's largest in ulps of the entry."""
    hi, lo = oracle.rows(start, stop, d_model, base, layout)
    binade = np.frexp(np.abs(hi))[1]
    found = []
    for dtype, bits in PRECISIONS:
        served = registry.rows(SinusoidalKey(d_model, base, layout, dtype), start, stop)
        error = np.abs((served.astype(np.float64) - hi) - lo)
        ulps = np.where(hi == 0, 0.0, error / np.ldexp(1.0, binade - bits))
        if dtype == "float64":
            found += [error.max(), ulps.max(), ulps[np.abs(hi) >= 0.5].max()]
        else:
            found.append(ulps.max())
    return tuple(float(x) for x in found)


def main(rows: int) -> None:
    overall = 0.0
    for base, d_model, near in product(BASES, WIDTHS, NEAR):
        stop = min(near + rows // 2, POSITION_CEILING + 1)
        for layout in LAYOUTS:
            f64, f64_ulps, f64_near_one, f32_ulps = worst(d_model, base, layout, stop - rows, stop)
            overall = max(overall, f64)
            print(
                f"d_model={d_model:5} base={base:<8g} {layout:11} "
                f"rows {stop - rows:>13,} .. {stop - 1:>13,}  "
                f"float64 {f64:.3e} = {f64 / U:.3f} x 2^-53 ({f64_ulps:9.1f} ulp of the entry, "
                f"{f64_near_one:.3f} for entries >= 0.5)  float32 {f32_ulps:.10f} ulp",
                flush=True,
            )
    print(f"worst float64 error {overall:.4e} = {overall / U:.3f} x 2^-53 (2^-51 = {4 * U:.4e})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 256)
