"""How a replica's memory grows with ``PE_CACHE_BYTES``: for each budget, a service is
started, its idle resident memory read, then its cache filled past the budget with distinct
tables (and their replayed answers) and the peak resident memory read.

    .venv/bin/python -m bench.memory [--budgets 64MiB,256MiB,1GiB]
"""

from __future__ import annotations

import argparse

import httpx

from bench.run import TABLE, MiB, free_port, rss_mib, service, wait_for
from service.settings import parse_bytes

TABLE_BYTES = 2048 * 512 * 4  # one table below: 4 MiB of float32


def fill(budget: int) -> tuple[float, float, int, int]:
    """Idle and peak RSS (MiB), the cache's bytes at the end and its evictions, after
    1.5 budgets' worth of distinct tables."""
    port = free_port()
    with service(port, PE_CACHE_BYTES=str(budget), PE_LOG_LEVEL="warning") as proc:
        url = f"http://127.0.0.1:{port}"
        wait_for(url + "/readyz")
        idle = peak = rss_mib(proc.pid)
        with httpx.Client(base_url=url, timeout=60) as client:
            for i in range(budget * 3 // 2 // TABLE_BYTES):
                client.get(
                    f"{TABLE}?max_len=2048&d_model=512&base={100 + i}&format=npy"
                ).raise_for_status()
                peak = max(peak, rss_mib(proc.pid))
            stats = client.get("/v1/cache").json()
        return idle, peak, stats["bytes"], stats["evictions"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budgets", default="64MiB,256MiB,1GiB")
    args = parser.parse_args()
    print("| PE_CACHE_BYTES | idle RSS | peak RSS, cache full | over the budget | cache bytes |")
    print("|---|---|---|---|---|")
    for text in args.budgets.split(","):
        budget = parse_bytes(text)
        assert isinstance(budget, int)
        idle, peak, held, evictions = fill(budget)
        assert evictions > 0, "the cache was not filled"
        print(
            f"| {text} | {idle:.0f} MiB | {peak:.0f} MiB | {peak - budget / MiB:+.0f} MiB "
            f"| {held / MiB:.0f} MiB |"
        )


if __name__ == "__main__":
    main()
