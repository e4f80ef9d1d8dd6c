"""A cached FLUX.1 RoPE table of 4,096 image tokens (a 64 x 64 patch grid, axes 16/56/56:
``cos`` and ``sin`` of 4,096 x 128) against a cached rotary table of the same size (4,096
positions, head_dim 128), as ``.npz``, on one service: wrk takes turns between them (the
order alternating every round), and the ratio of their medians says whether a multi-axis
table costs more to serve than a plain one once both are kept. A cold pair (each computed
once, in process) is timed beside it, the rotary table as the baseline.

    .venv/bin/python -m bench.diffusion [--rounds 6] [--seconds 4]
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Callable

import httpx
import numpy as np

from bench.run import Target, free_port, service, wait_for, wrk
from service.encodings import registry
from service.routes import FAMILIES
from service.web.families import readers

# the same bytes: two float32 arrays of 4,096 x 128
FLUX: tuple[str, str] = ("rope-nd", "preset=flux&grid=64,64")
ROTARY: tuple[str, str] = ("rotary", "max_len=4096&head_dim=128")


def cold(family: str, query: str, runs: int) -> float:
    """The median time to compute the table once, in process, from its query."""
    read = readers(FAMILIES)[family]
    times = []
    for _ in range(runs):
        key, rows = read(query)
        start = time.perf_counter()
        registry.rows(key, 0, rows)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=int, default=4)
    args = parser.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with service(port, PE_LOG_LEVEL="warning"):
        wait_for(base + "/readyz")
        targets: dict[str, Target] = {}
        for name, (family, query) in (("flux", FLUX), ("rotary", ROTARY)):
            url = f"{base}/v1/encodings/{family}?{query}&format=npz"
            answer = httpx.get(url)
            answer.raise_for_status()
            arrays = np.load(io.BytesIO(answer.content), allow_pickle=False)
            shapes = {member: arrays[member].shape for member in arrays.files}
            print(f"{name}: {len(answer.content):,} bytes, {shapes}")
            targets[name] = Target(name, url)
            wrk(targets[name], 1)  # warm: the answer kept for wrk's requests
        for i in range(args.rounds):
            order = list(targets.values())
            for target in order if i % 2 else order[::-1]:
                target.runs.append(wrk(target, args.seconds))
    rates = {name: target.median().rps for name, target in targets.items()}
    for name, target in targets.items():
        runs = ", ".join(f"{r.rps:,.0f}" for r in target.runs)
        print(f"{name}: median {rates[name]:,.0f} requests/s ({runs})")
    print(f"cached: flux / rotary = {rates['flux'] / rates['rotary']:.3f}")
    timed: dict[str, Callable[[], float]] = {
        "flux": lambda: cold(*FLUX, runs=5),
        "rotary": lambda: cold(*ROTARY, runs=5),
    }
    seconds = {name: measure() for name, measure in timed.items()}
    for name, value in seconds.items():
        print(f"{name}: computed in {value * 1e3:.2f} ms (median of 5)")
    print(f"cold: flux / rotary = {seconds['flux'] / seconds['rotary']:.3f}")


if __name__ == "__main__":
    main()
