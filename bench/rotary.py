"""Throughput of ``POST /v1/encodings/rotary/apply`` for a (1, 32, 4096, 128) float32 batch
of queries, as ``.npy``, against a minimal numpy endpoint measured in the same run.

    .venv/bin/python bench/rotary.py [requests]

Both servers run under uvicorn on loopback ports: the service (``python -m service``, with
``PE_MAX_BODY_BYTES`` raised so the 64 MiB batch is allowed) and the minimal endpoint a
user would write (``np.load``, ``x * cos + rotate_half(x) * sin`` with precomputed float32
tables, ``np.save``). The requests alternate between them over one keep-alive connection
each; the script prints MB/s counting request and response bodies, and the ratio.
"""

from __future__ import annotations

import io
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import httpx
import numpy as np
import uvicorn
from fastapi import FastAPI, Request, Response

from bench.apply import free_port

SHAPE = (1, 32, 4096, 128)
URL = "/v1/encodings/rotary/apply"

minimal = FastAPI()
_HEAD = SHAPE[-1]
_ANGLES = np.arange(SHAPE[-2], dtype=np.float32)[:, None] * (
    1.0 / (10000.0 ** (np.arange(0, _HEAD, 2, dtype=np.float32) / _HEAD))
)
_EMB = np.concatenate([_ANGLES, _ANGLES], axis=-1)
_COS, _SIN = np.cos(_EMB), np.sin(_EMB)


@minimal.post("/apply")
async def minimal_apply(request: Request) -> Response:
    x = np.load(io.BytesIO(await request.body()), allow_pickle=False)
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    y = x * _COS + rotated * _SIN
    out = io.BytesIO()
    np.save(out, y)
    return Response(out.getvalue(), media_type="application/x-npy")


def _serve_minimal(port: int) -> uvicorn.Server:
    config = uvicorn.Config(minimal, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    return server


def _wait(client: httpx.Client, path: str) -> None:
    for _ in range(400):
        try:
            client.get(path)
            return
        except httpx.TransportError:
            time.sleep(0.05)


def main(runs: int) -> None:
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    buffer = io.BytesIO()
    np.save(buffer, x)
    body = buffer.getvalue()
    port, minimal_port = free_port(), free_port()
    env = {**os.environ, "PE_PORT": str(port), "PE_MAX_BODY_BYTES": str(256 << 20)}
    server = subprocess.Popen(
        [sys.executable, "-m", "service"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    baseline = _serve_minimal(minimal_port)
    try:
        service = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300)
        floor = httpx.Client(base_url=f"http://127.0.0.1:{minimal_port}", timeout=300)
        _wait(service, "/healthz")
        _wait(floor, "/docs")

        def post(client: httpx.Client, url: str) -> Callable[[], float]:
            def step() -> float:
                headers = {"content-type": "application/x-npy", "accept": "application/x-npy"}
                start = time.perf_counter()
                response = client.post(url, content=body, headers=headers)
                response.raise_for_status()
                assert len(response.content) == len(body)
                return time.perf_counter() - start

            return step

        ours, theirs = post(service, URL), post(floor, "/apply")
        ours(), theirs()  # warm-up
        times: dict[str, list[float]] = {"service": [], "minimal": []}
        for _ in range(runs):
            times["service"].append(ours())
            times["minimal"].append(theirs())
        moved = 2 * len(body)
        print(f"batch {SHAPE} float32 (.npy, {len(body) / 2**20:.0f} MiB); {runs} requests each")
        rates = {}
        for name, spent in times.items():
            mean = statistics.fmean(spent)
            rates[name] = moved / mean / 1e6
            print(
                f"{name:<8} {rates[name]:7.1f} MB/s in+out  {1 / mean:5.2f} req/s  "
                f"p50 {statistics.median(spent) * 1e3:7.1f} ms"
            )
        print(f"ratio service / minimal: {rates['service'] / rates['minimal']:.2f}")
    finally:
        server.terminate()
        server.wait()
        baseline.should_exit = True


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
