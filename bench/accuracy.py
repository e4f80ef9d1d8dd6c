"""Largest error of the served tables against 200-bit arithmetic, near position 10^6 and
just below 2^31 (``PE_MAX_POSITION``'s ceiling): float32 in ulps of each entry (the promise:
half an ulp, one rounding), float64 in units of 2^-53 (the promise: a few ulps of 1).

.venv/bin/python bench/accuracy.py [samples]
"""

from __future__ import annotations

import sys

import numpy as np

from service.encodings import registry
from service.encodings.sinusoidal import SinusoidalKey
from service.settings import POSITION_CEILING
from tests import oracle


def main(samples: int) -> None:
    rng = np.random.default_rng(1)
    for stop in (1_000_000, POSITION_CEILING + 1):
        start = stop - 1000
        for d_model, base in [(512, 10000.0), (1024, 10000.0), (1023, 10000.0), (64, 100.0)]:
            rows = rng.integers(0, stop - start, samples)
            cols = rng.integers(0, d_model, samples)
            line = [f"rows {start:>13,} .. {stop - 1:>13,}  d_model={d_model:5} base={base:g}"]
            for dtype in ("float32", "float64"):
                table = registry.rows(SinusoidalKey(d_model, base, dtype=dtype), start, stop)
                worst = ulps = 0.0
                for r, k in zip(rows.tolist(), cols.tolist(), strict=True):
                    error = oracle.exact_error(table[r, k], start + r, k, d_model, base)
                    truth = abs(oracle.exact(start + r, k, d_model, base))
                    unit = float(np.spacing(np.float32(truth))) if dtype == "float32" else 2**-53
                    worst, ulps = max(worst, error), max(ulps, error / unit)
                unit_name = "ulp" if dtype == "float32" else "x 2^-53"
                line.append(f"{dtype} max |error| {worst:.3e} ({ulps:.2f} {unit_name})")
            print("  ".join(line))
    print(f"({samples} random entries each; 2^-24 = {2**-24:.3e}, 2^-53 = {2**-53:.3e})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
