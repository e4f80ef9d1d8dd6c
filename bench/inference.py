"""Throughput of the Open Inference Protocol's binary tensor extension against the REST
``.npy`` apply, for a (32, 256, 512) float32 batch, in the same run on the same server.

    .venv/bin/python -m bench.inference [requests]

Three clients take turns on one ``python -m service``: httpx posting ``.npy`` to
``/v1/encodings/sinusoidal/apply`` (the baseline), httpx posting the protocol's framing
(JSON header + binary tensor, binary output) to ``/v2/models/sinusoidal-apply/infer``, and
the protocol's own client, ``tritonclient.http``, doing the same. Each keeps one keep-alive
connection; the script prints MB/s counting request and response tensors, and the ratios.
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from collections.abc import Callable

import httpx
import numpy as np
import orjson
import tritonclient.http as triton

from tests.support import running

SHAPE = (32, 256, 512)
APPLY = "/v1/encodings/sinusoidal/apply"
INFER = "/v2/models/sinusoidal-apply/infer"


def main(runs: int) -> None:
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    buffer = io.BytesIO()
    np.save(buffer, x)
    npy = buffer.getvalue()
    spec = {"name": "embeddings", "shape": list(SHAPE), "datatype": "FP32"}
    header = orjson.dumps(
        {
            "inputs": [{**spec, "parameters": {"binary_data_size": x.nbytes}}],
            "outputs": [{"name": "embeddings", "parameters": {"binary_data": True}}],
        }
    )
    framed = header + x.tobytes()
    with running() as url:
        http = httpx.Client(base_url=url, timeout=300)
        protocol = triton.InferenceServerClient(url.removeprefix("http://"), network_timeout=300)
        tensor = triton.InferInput("embeddings", list(SHAPE), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        wanted = [triton.InferRequestedOutput("embeddings", binary_data=True)]

        def timed(call: Callable[[], int]) -> Callable[[], float]:
            def step() -> float:
                start = time.perf_counter()
                received = call()
                assert received == x.nbytes, received
                return time.perf_counter() - start

            return step

        def rest() -> int:
            headers = {"content-type": "application/x-npy", "accept": "application/x-npy"}
            response = http.post(APPLY, content=npy, headers=headers).raise_for_status()
            return len(response.content) - (len(npy) - x.nbytes)

        def binary() -> int:
            headers = {"inference-header-content-length": str(len(header))}
            response = http.post(INFER, content=framed, headers=headers).raise_for_status()
            return len(response.content) - int(response.headers["inference-header-content-length"])

        def client() -> int:
            result = protocol.infer("sinusoidal-apply", [tensor], outputs=wanted)
            return int(result.as_numpy("embeddings").nbytes)

        steps = {
            "rest .npy": timed(rest),
            "v2 binary": timed(binary),
            "tritonclient": timed(client),
        }
        for step in steps.values():
            step()  # warm-up
        times: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(runs):
            for name, step in steps.items():
                times[name].append(step())
        moved = 2 * x.nbytes
        print(f"batch {SHAPE} float32 ({x.nbytes / 2**20:.0f} MiB); {runs} requests each")
        rates = {}
        for name, spent in times.items():
            mean = statistics.fmean(spent)
            rates[name] = moved / mean / 1e6
            print(
                f"{name:<13} {rates[name]:7.1f} MB/s in+out  {1 / mean:5.2f} req/s  "
                f"p50 {statistics.median(spent) * 1e3:7.1f} ms"
            )
        for name in ("v2 binary", "tritonclient"):
            print(f"ratio {name} / rest .npy: {rates[name] / rates['rest .npy']:.2f}")
        protocol.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
