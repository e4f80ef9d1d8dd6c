"""What a precision audit costs: a cold audit of Llama 3.1's table (distinct bases, so
nothing is replayed) to 131,072 and to 2^31 positions, and one of long dense scans,
against a cold GET of its first 4096 rows as the yardstick, each the median of ``--runs``
over one running service.

    .venv/bin/python bench/audit.py [--runs 5]

An audit costs bands × samples × width: to 2^31 it evaluates about 31 bands of 512
positions (and every position below 2^21 entries), not 2^31 rows; and, for the first
crossings of its thresholds below 2^23 entries, every position before them (the last case:
to 3,355,445 positions of 2 entries).
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

from tests.support import serving

LLAMA = (
    "head_dim=128&scaling=llama3&factor=8&low_freq_factor=1&high_freq_factor=4"
    "&original_max_position_embeddings=8192"
)
SCANNED = "head_dim=2&scaling=linear&factor=0.1"


def timed(client: httpx.Client, url: str) -> float:
    start = time.perf_counter()
    answer = client.get(url)
    elapsed = time.perf_counter() - start
    answer.raise_for_status()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    # each case's path and its first base (a new base a run: nothing replayed)
    cases = {
        "GET 4096 rows (yardstick)": (f"/v1/encodings/rotary?max_len=4096&format=npy&{LLAMA}", 5e5),
        "audit to 131,072": (f"/v1/audit/rotary?max_len=131072&{LLAMA}", 501000),
        "audit to 2^31": (f"/v1/audit/rotary?max_len=2147483648&{LLAMA}", 502000),
        # the longest dense scan of first crossings: to 3,355,445 for six paths
        "audit, dense scans": (f"/v1/audit/rotary?max_len=4194304&{SCANNED}", 31),
    }
    with serving() as (url, _), httpx.Client(base_url=url, timeout=300) as client:
        medians: dict[str, float] = {}
        for name, (path, first) in cases.items():
            times = [timed(client, f"{path}&base={first + run}") for run in range(runs)]
            medians[name] = statistics.median(times)
    yardstick = medians["GET 4096 rows (yardstick)"]
    for name, median in medians.items():
        print(
            f"{name:28s} median {median * 1000:8.1f} ms  {median / yardstick:6.1f}x the yardstick"
        )


if __name__ == "__main__":
    main()
