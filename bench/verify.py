"""What checking a client's table costs: ``POST /v1/verify`` and ``POST /v1/identify`` of
Llama 3.1's rotary table (131,072 x 128: ``cos`` and ``sin`` posted as ``.npz``, 128 MiB)
against a ``GET`` of the same table as ``.npz``, over one running service, taking turns (the
order alternating every round, as the second of a pair runs on a warmer machine); the
ratios of their medians are what a check costs in GETs of its table.

    .venv/bin/python -m bench.verify [--rounds 5]

The GET is answered from the cache after its first round; verify computes the claim's table
(cached too, the same key), the exact one and the library's, and diagnoses nothing (the
posted table matches); identify reads the frequencies and tries its candidates.
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

from bench.run import free_port, service, wait_for

LLAMA = (
    "head_dim=128&base=500000&scaling=llama3&factor=8&low_freq_factor=1&high_freq_factor=4"
    "&original_max_position_embeddings=8192"
)
ROWS = 131_072
# the posted table (128 MiB) within the body limits
BODY_BYTES = str(256 << 20)
POSTED_BYTES = str(512 << 20)
NPZ = {"content-type": "application/x-npz"}


def timed(client: httpx.Client, method: str, url: str, body: bytes | None = None) -> float:
    headers = NPZ if body is not None else {}
    start = time.perf_counter()
    answer = client.request(method, url, content=body, headers=headers)
    elapsed = time.perf_counter() - start
    answer.raise_for_status()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (
        service(
            port,
            PE_LOG_LEVEL="warning",
            PE_MAX_BODY_BYTES=BODY_BYTES,
            PE_POSTED_BYTES=POSTED_BYTES,
        ),
        httpx.Client(base_url=base, timeout=600) as client,
    ):
        wait_for(base + "/readyz")
        table = client.get(f"/v1/encodings/rotary?max_len={ROWS}&{LLAMA}&format=npz")
        table.raise_for_status()
        body = table.content
        print(f"the table: {len(body):,} bytes of .npz")
        cases = {
            "GET npz": ("GET", f"/v1/encodings/rotary?max_len={ROWS}&{LLAMA}&format=npz", None),
            "verify": ("POST", f"/v1/verify?family=rotary&{LLAMA}", body),
            "identify": ("POST", "/v1/identify", body),
        }
        # once each first: what they say, and the claim's table cached as the GET's is
        said = {
            name: client.request(method, url, content=posted, headers=NPZ).json()
            for name, (method, url, posted) in cases.items()
            if posted is not None
        }
        print(f"verify says: {said['verify']['match']}")
        found = said["identify"]
        print(f"identify says: matched {found['matched']}, tried {found['tried']}")
        times: dict[str, list[float]] = {name: [] for name in cases}
        for i in range(rounds):
            order = list(cases.items())
            for name, (method, url, posted) in order if i % 2 else order[::-1]:
                times[name].append(timed(client, method, url, posted))
    medians = {name: statistics.median(each) for name, each in times.items()}
    yardstick = medians["GET npz"]
    for name, median in medians.items():
        runs = ", ".join(f"{each * 1000:.0f}" for each in times[name])
        print(
            f"{name:10s} median {median * 1000:8.1f} ms  {median / yardstick:6.2f}x the GET"
            f"  ({runs} ms)"
        )


if __name__ == "__main__":
    main()
