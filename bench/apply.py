"""Throughput of ``POST /v1/encodings/sinusoidal/apply`` for a (32, 256, 512) float32 batch,
as ``.npy`` and as JSON, against an in-process numpy floor measured in the same run.

    .venv/bin/python bench/apply.py [requests]

Starts ``python -m service`` on a free loopback port (with PE_MAX_JSON_ELEMENTS raised so
the 4.2 M-number JSON batch is allowed), posts the batch sequentially over one keep-alive
connection, and prints MB/s counting request and response bodies.
"""

from __future__ import annotations

import io
import math
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import httpx
import numpy as np
import orjson

from service.encodings import registry
from service.encodings.sinusoidal import SinusoidalKey

SHAPE = (32, 256, 512)
URL = "/v1/encodings/sinusoidal/apply"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed(step: Callable[[], int], runs: int) -> tuple[float, float, int]:
    """Seconds per run (median and mean) and bytes moved per run."""
    moved = step()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times), statistics.fmean(times), moved


def report(name: str, result: tuple[float, float, int], floor: tuple[float, float, int]) -> None:
    median, mean, moved = result
    rate, floor_rate = moved / mean / 1e6, floor[2] / floor[1] / 1e6
    print(
        f"{name:<28} {rate:8.1f} MB/s in+out  {1 / mean:6.2f} req/s  p50 {median * 1e3:7.1f} ms"
        f"  floor {floor_rate:8.1f} MB/s  ratio {rate / floor_rate:5.2f}"
    )


def main(runs: int) -> None:
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    buffer = io.BytesIO()
    np.save(buffer, x)
    npy_body = buffer.getvalue()
    json_body = orjson.dumps({"embeddings": x}, option=orjson.OPT_SERIALIZE_NUMPY)
    table = registry.rows(SinusoidalKey(SHAPE[2]), 0, SHAPE[1])
    scale = math.sqrt(SHAPE[2])

    def npy_floor() -> int:
        y = np.load(io.BytesIO(npy_body), allow_pickle=False) * scale + table
        out = io.BytesIO()
        np.save(out, y)
        return len(npy_body) + len(out.getvalue())

    def json_floor() -> int:
        y = np.array(orjson.loads(json_body)["embeddings"], dtype=np.float32) * scale + table
        out = orjson.dumps({"embeddings": y}, option=orjson.OPT_SERIALIZE_NUMPY)
        return len(json_body) + len(out)

    port = free_port()
    env = {**os.environ, "PE_PORT": str(port), "PE_MAX_JSON_ELEMENTS": str(1 << 23)}
    server = subprocess.Popen(
        [sys.executable, "-m", "service"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
        for _ in range(200):
            try:
                client.get("/healthz")
                break
            except httpx.TransportError:
                time.sleep(0.05)

        def post(body: bytes, kind: str) -> Callable[[], int]:
            def step() -> int:
                headers = {"content-type": kind, "accept-encoding": "identity"}
                response = client.post(URL, content=body, headers=headers)
                response.raise_for_status()
                return len(body) + len(response.content)

            return step

        print(
            f"batch {SHAPE} float32: .npy {len(npy_body) / 1e6:.1f} MB, "
            f"JSON {len(json_body) / 1e6:.1f} MB; {runs} requests each"
        )
        report(
            ".npy over HTTP",
            timed(post(npy_body, "application/x-npy"), runs),
            timed(npy_floor, runs),
        )
        report(
            "JSON over HTTP",
            timed(post(json_body, "application/json"), runs),
            timed(json_floor, runs),
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
