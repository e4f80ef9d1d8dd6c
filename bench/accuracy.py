"""Largest error of the served tables against 200-bit arithmetic, near position 10^6.

.venv/bin/python bench/accuracy.py [samples]
"""

from __future__ import annotations

import sys

import numpy as np

from service import core
from tests import oracle


def main(samples: int) -> None:
    start, stop = 999_000, 1_000_000
    rng = np.random.default_rng(1)
    for d_model, base in [(512, 10000.0), (1024, 10000.0), (1023, 10000.0), (64, 100.0)]:
        rows = rng.integers(0, stop - start, samples)
        cols = rng.integers(0, d_model, samples)
        line = [f"d_model={d_model:5} base={base:g}"]
        for dtype in ("float32", "float64"):
            table = core.encoding(start, stop, d_model, base, dtype=dtype)
            worst = max(
                oracle.exact_error(table[r, k], start + r, k, d_model, base)
                for r, k in zip(rows, cols, strict=True)
            )
            line.append(f"{dtype} max |error| {worst:.3e}")
        print("  ".join(line))
    print(f"({samples} random entries each, rows {start:,} .. {stop - 1:,}; 2^-23 = {2**-23:.3e})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
