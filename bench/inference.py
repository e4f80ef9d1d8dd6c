"""Throughput of the Open Inference Protocol's binary tensor extension against the REST
``.npy`` apply, for a (32, 256, 512) float32 batch, in the same run on the same server.

    .venv/bin/python -m bench.inference [requests]

Three clients take turns on one ``python -m service``: httpx posting ``.npy`` to
``/v1/encodings/sinusoidal/apply`` (the baseline), httpx posting the protocol's framing
(JSON header + binary tensor, binary output) to ``/v2/models/sinusoidal-apply/infer``, and
the protocol's own client, ``tritonclient.http``, doing the same. Each keeps one keep-alive
connection; the script prints MB/s counting request and response tensors, and the ratios.

    .venv/bin/python -m bench.inference rotary [requests]

A rotary table instead (Llama 3.1's, 8,192 positions × 128, cos and sin: 8 MiB): ``GET
/v1/encodings/rotary?format=npy`` (the baseline: a cached table, answered by the replay
layer after the first), ``POST /v1/encodings/rotary/positions`` with the ids as ``.npy``
(the same work as the protocol's: the rows at posted positions), and the ``rotary`` model
with binary outputs by httpx, ``tritonclient.http`` and ``tritonclient.grpc`` (the server
listens for gRPC too). MB/s count the answer's tensors.
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, Final

import httpx
import numpy as np
import orjson
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton

from tests.support import LLAMA_31, free_port, running

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

        steps = {"rest .npy": rest, "v2 binary": binary, "tritonclient": client}
        what = f"batch {SHAPE} float32, in and out"
        _race(steps, runs, x.nbytes, what, moved=2 * x.nbytes)
        protocol.close()


ROWS: Final = 8192


def rotary(runs: int) -> None:
    """The rotary table by /v1 and by the protocol's model, in turns on one server."""
    ids = np.arange(ROWS, dtype=np.int64)
    buffer = io.BytesIO()
    np.save(buffer, ids)
    posted = buffer.getvalue()
    spec = {"name": "positions", "shape": [ROWS], "datatype": "INT64"}
    header = orjson.dumps(
        {
            "inputs": [{**spec, "parameters": {"binary_data_size": ids.nbytes}}],
            "parameters": {**LLAMA_31, "binary_data_output": True},
        }
    )
    framed = header + ids.tobytes()
    expected = 2 * ROWS * 128 * 4
    port = free_port()
    with running({"PE_GRPC_PORT": str(port)}) as url:
        http = httpx.Client(base_url=url, timeout=300)
        over_http = triton.InferenceServerClient(url.removeprefix("http://"), network_timeout=300)
        over_grpc = triton_grpc.InferenceServerClient(f"127.0.0.1:{port}")
        table = {**LLAMA_31, "max_len": ROWS, "format": "npy"}
        at = {**LLAMA_31, "max_len": ROWS, "format": "npy"}

        def get() -> int:
            response = http.get("/v1/encodings/rotary", params=table).raise_for_status()
            return int(np.load(io.BytesIO(response.content)).nbytes)

        def positions() -> int:
            headers = {"content-type": "application/x-npy"}
            response = http.post(
                "/v1/encodings/rotary/positions", params=at, content=posted, headers=headers
            ).raise_for_status()
            return int(np.load(io.BytesIO(response.content)).nbytes)

        def binary() -> int:
            headers = {"inference-header-content-length": str(len(header))}
            response = http.post(
                "/v2/models/rotary/infer", content=framed, headers=headers
            ).raise_for_status()
            return len(response.content) - int(response.headers["inference-header-content-length"])

        def client(protocol: Any, module: Any, binary_data: bool) -> Callable[[], int]:
            given = module.InferInput("positions", [ROWS], "INT64")
            given.set_data_from_numpy(ids)
            names = ("cos", "sin")
            if binary_data:
                wanted = [module.InferRequestedOutput(name, binary_data=True) for name in names]
            else:
                wanted = [module.InferRequestedOutput(name) for name in names]

            def call() -> int:
                result = protocol.infer("rotary", [given], outputs=wanted, parameters=LLAMA_31)
                return sum(int(result.as_numpy(name).nbytes) for name in names)

            return call

        steps = {
            "GET .npy": get,
            "positions .npy": positions,
            "v2 binary": binary,
            "tritonclient http": client(over_http, triton, True),
            "tritonclient grpc": client(over_grpc, triton_grpc, False),
        }
        _race(steps, runs, expected, f"rotary table {ROWS} x 128, cos and sin float32")
        over_http.close()
        over_grpc.close()


def _race(
    steps: dict[str, Callable[[], int]], runs: int, size: int, what: str, moved: int = 0
) -> None:
    """Each step in turn, ``runs`` times after a warm-up, each answering ``size`` bytes of
    tensors; MB/s of ``moved`` bytes a step (default ``size``), and each one's ratio to the
    first."""
    moved = moved or size
    for step in steps.values():
        assert step() == size  # warm-up
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(runs):
        for name, step in steps.items():
            start = time.perf_counter()
            assert step() == size
            times[name].append(time.perf_counter() - start)
    print(f"{what} ({moved / 2**20:.0f} MiB); {runs} requests each")
    rates = {}
    for name, spent in times.items():
        mean = statistics.fmean(spent)
        rates[name] = moved / mean / 1e6
        print(
            f"{name:<18} {rates[name]:7.1f} MB/s  {1 / mean:6.2f} req/s  "
            f"p50 {statistics.median(spent) * 1e3:7.1f} ms"
        )
    first = next(iter(rates))
    for name in list(rates)[1:]:
        print(f"ratio {name} / {first}: {rates[name] / rates[first]:.2f}")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["rotary"]:
        rotary(int(arguments[1]) if len(arguments) > 1 else 20)
    else:
        main(int(arguments[0]) if arguments else 20)
