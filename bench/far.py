"""What a small request costs far down a table against the same request near its top:
time of a cold request (median over distinct tables) and the server's RSS growth after it.

    .venv/bin/python bench/far.py [--runs 5] [--checkout DIR]

Each case runs against a fresh ``python -m service``; ``--checkout`` starts the server from
another checkout of this repository (for a before/after comparison in one run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from tests.support import APPLY, TABLE, npy_bytes, npz_bytes, rss_mib, serving

Request = Callable[[httpx.Client, float], httpx.Response]


def table_slice(start: int) -> Request:
    """Ten float64 rows of a d_model=64 table from ``start``."""

    def send(client: httpx.Client, base: float) -> httpx.Response:
        query = f"max_len=1000000&d_model=64&dtype=float64&start={start}&stop={start + 10}"
        return client.get(f"{TABLE}?{query}&base={base}&format=npy")

    return send


def apply_ids(position: int) -> Request:
    """One row of d_model=8 at ``position``, by position ids."""
    body = npz_bytes(embeddings=np.ones((1, 8), np.float32), position_ids=np.array([position]))

    def send(client: httpx.Client, base: float) -> httpx.Response:
        headers = {"content-type": "application/x-npz"}
        return client.post(f"{APPLY}?base={base}&format=npy", content=body, headers=headers)

    return send


def apply_offset(offset: int) -> Request:
    """Two rows of d_model=4096 from ``offset``."""
    body = npy_bytes(np.ones((2, 4096), np.float32))

    def send(client: httpx.Client, base: float) -> httpx.Response:
        headers = {"content-type": "application/x-npy"}
        return client.post(f"{APPLY}?base={base}&offset={offset}", content=body, headers=headers)

    return send


CASES: list[tuple[str, Request, Request]] = [
    ("10-row float64 slice, d_model=64: start=0 vs 999,990", table_slice(0), table_slice(999_990)),
    ("1-row apply by position id, d_model=8: 0 vs 8,000,000", apply_ids(0), apply_ids(8_000_000)),
    ("2-row apply, d_model=4096: offset=0 vs 20,000", apply_offset(0), apply_offset(20_000)),
]


def measure(send: Request, runs: int, checkout: Path | None) -> tuple[float, float, str]:
    """Median seconds of a cold request (a new base each), RSS growth (MiB), outcome."""
    env = {"PE_LOG_LEVEL": "warning"}
    # python -m service in another checkout: its own package comes first on the path
    with (
        serving(env, cwd=checkout) as (url, process),
        httpx.Client(base_url=url, timeout=120) as c,
    ):
        idle = rss_mib(process.pid)
        times, outcome = [], ""
        for i in range(runs):
            start = time.perf_counter()
            response = send(c, 10000.0 + i)
            times.append(time.perf_counter() - start)
            outcome = f"{response.status_code}" + (
                f" {response.json().get('setting', '')}" if response.status_code >= 400 else ""
            )
        return statistics.median(times), rss_mib(process.pid) - idle, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--checkout", type=Path, default=None)
    args = parser.parse_args()
    where = args.checkout or Path(__file__).resolve().parents[1]
    print(f"server from {where} (pid of this script {os.getpid()}), {args.runs} cold runs each")
    print("| case | near: time, RSS growth | far: time, RSS growth | far ÷ near (time) |")
    print("|---|---:|---:|---:|")
    for name, near, far in CASES:
        t_near, m_near, o_near = measure(near, args.runs, args.checkout)
        t_far, m_far, o_far = measure(far, args.runs, args.checkout)
        print(
            f"| {name} | {t_near * 1e3:.1f} ms, {m_near:+.1f} MiB ({o_near}) "
            f"| {t_far * 1e3:.1f} ms, {m_far:+.1f} MiB ({o_far}) | {t_far / t_near:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
