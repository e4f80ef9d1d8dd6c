"""The Open Inference Protocol over gRPC as its own client speaks it: the real
``tritonclient.grpc`` (and the protocol's generated stub, for typed contents) against a
real ``python -m service`` with ``PE_GRPC_PORT`` set, each answer compared with the v1
endpoint the model mirrors, on the same process."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonclient.utils import InferenceServerException

from service.errors import BodyTooLarge, ClientGone, InvalidInput, LimitExceeded, MalformedBody
from service.inference import grpc as front
from service.inference.models import Repository, UnknownModel
from service.limits import Budget, Limits
from service.routes import FAMILIES
from service.settings import Settings
from tests.support import (
    APPLY,
    DATATYPES,
    ROOT,
    ROTARY_APPLY,
    TABLE,
    WAIT,
    free_port,
    load,
    main_in_process,
    modules_of_a_started_app,
    npy_bytes,
    npz_bytes,
    serving,
)

MAX_BODY_BYTES = 1 << 20


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (its sockets in LISTEN state)."""
    sockets = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            sockets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and f"socket:[{fields[9]}]" in sockets:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, str]]:
    """The service's base URL and its gRPC address, with a 1 MiB body limit."""
    port = free_port()
    env = {"PE_GRPC_PORT": str(port), "PE_MAX_BODY_BYTES": str(MAX_BODY_BYTES)}
    with serving(env) as (url, process):
        assert listening_ports(process.pid) == {int(url.rsplit(":", 1)[1]), port}
        yield url, f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def server(live: tuple[str, str]) -> Iterator[Any]:
    client = triton.InferenceServerClient(live[1])
    yield client
    client.close()


@pytest.fixture(scope="module")
def stub(live: tuple[str, str]) -> Iterator[Any]:
    """The protocol's generated stub, for what tritonclient does not send (typed contents)."""
    with grpc.insecure_channel(live[1]) as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


# one for the module: each client builds a TLS context (some 50 ms), unused over HTTP
@pytest.fixture(scope="module")
def http(live: tuple[str, str]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live[0], timeout=WAIT) as client:
        yield client


def tensor(name: str, array: np.ndarray[Any, Any], datatype: str) -> Any:
    given = triton.InferInput(name, list(array.shape), datatype)
    given.set_data_from_numpy(array)
    return given


def refused(call: Any) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value


def test_health_and_metadata(server: Any) -> None:
    assert server.is_server_live()
    assert server.is_server_ready()
    assert server.is_model_ready("sinusoidal")
    assert server.is_model_ready("rotary-apply", "1")
    metadata = server.get_server_metadata(as_json=True)
    assert metadata["name"] == "positional-encodings"
    table = server.get_model_metadata("sinusoidal", as_json=True)
    assert table["versions"] == ["1"]
    assert table["inputs"] == [{"name": "positions", "datatype": "INT64", "shape": ["-1"]}]
    assert table["outputs"] == [{"name": "encodings", "datatype": "FP32", "shape": ["-1", "-1"]}]
    applied = server.get_model_metadata("sinusoidal-apply", "1", as_json=True)
    assert [spec["name"] for spec in applied["inputs"]] == ["embeddings", "position_ids"]


@pytest.mark.parametrize(("datatype", "dtype"), [("INT64", np.int64), ("INT32", np.int32)])
def test_sinusoidal_rows_at_positions_equal_the_table(
    server: Any, http: httpx.Client, datatype: str, dtype: type[np.integer[Any]]
) -> None:
    positions = np.array([7, 0, 4095, 7, 300], dtype=dtype)
    result = server.infer(
        "sinusoidal",
        [tensor("positions", positions, datatype)],
        outputs=[triton.InferRequestedOutput("encodings")],
        parameters={"d_model": 64, "base": 500.0, "rounding": "exact"},
        request_id="rows",
    )
    table = load(
        http.get(TABLE, params={"max_len": 4096, "d_model": 64, "base": 500.0, "rounding": "exact"})
    )
    rows = result.as_numpy("encodings")
    assert rows.dtype == np.float32
    np.testing.assert_array_equal(rows, table[positions])
    assert result.get_response().id == "rows"


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sinusoidal_apply_equals_the_rest_apply(
    server: Any, http: httpx.Client, dtype: Any
) -> None:
    x = np.random.default_rng(1).standard_normal((2, 16, 64)).astype(dtype)
    ids = np.tile(np.arange(100, 116, dtype=np.int64)[::-1], (2, 1))
    params: dict[str, Any] = {"scale": 2.0, "preset": "fairseq"}
    result = server.infer(
        "sinusoidal-apply",
        [tensor("embeddings", x, DATATYPES[dtype]), tensor("position_ids", ids, "INT64")],
        parameters=params,
    )
    expected = load(
        http.post(
            APPLY,
            params=params,
            content=npz_bytes(embeddings=x, position_ids=ids),
            headers={"content-type": "application/x-npz", "accept": "application/x-npy"},
        )
    )
    y = result.as_numpy("embeddings")
    assert y.dtype == dtype
    assert y.tobytes() == expected.tobytes()


def test_typed_contents_equal_raw_contents(server: Any, stub: Any) -> None:
    """Tensors in ``fp32_contents``/``int64_contents`` give what raw bytes give."""
    x = np.random.default_rng(3).standard_normal((2, 3, 8)).astype(np.float32)
    ids = np.array([[5, 4, 3], [0, 1, 2]], np.int64)
    request = pb.ModelInferRequest(model_name="sinusoidal-apply")
    request.parameters["offset"].int64_param = 3
    embeddings = request.inputs.add(name="embeddings", datatype="FP32", shape=x.shape)
    embeddings.contents.fp32_contents.extend(x.ravel().tolist())
    positions = request.inputs.add(name="position_ids", datatype="INT64", shape=ids.shape)
    positions.contents.int64_contents.extend(ids.ravel().tolist())
    typed = triton.InferResult(stub.ModelInfer(request)).as_numpy("embeddings")
    raw = server.infer(
        "sinusoidal-apply",
        [tensor("embeddings", x, "FP32"), tensor("position_ids", ids, "INT64")],
        parameters={"offset": 3},
    ).as_numpy("embeddings")
    np.testing.assert_array_equal(typed, raw)


def test_rotary_apply(server: Any, http: httpx.Client) -> None:
    x = np.random.default_rng(2).standard_normal((1, 4, 32, 64)).astype(np.float32)
    params: dict[str, Any] = {
        "convention": "interleaved",
        "scaling": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 2048,
        "offset": 5,
    }
    result = server.infer("rotary-apply", [tensor("embeddings", x, "FP32")], parameters=params)
    expected = load(
        http.post(
            ROTARY_APPLY,
            params=params,
            content=npy_bytes(x),
            headers={"content-type": "application/x-npy"},
        )
    )
    np.testing.assert_array_equal(result.as_numpy("embeddings"), expected)


def _short(server: Any) -> Any:
    x = np.ones((1, 2, 4), np.float32)
    given = tensor("embeddings", x, "FP32").set_shape([1, 2, 5])
    return server.infer("sinusoidal-apply", [given])


P = tensor("positions", np.arange(4, dtype=np.int64), "INT64")
ONE = tensor("positions", np.arange(1, dtype=np.int64), "INT64")


@pytest.mark.parametrize(
    ("call", "status", "words"),
    [
        (lambda s: s.infer("nope", [P]), "NOT_FOUND", ["nope", "sinusoidal"]),
        (lambda s: s.infer("sinusoidal", [P], model_version="2"), "NOT_FOUND", ["version"]),
        (lambda s: s.get_model_metadata("nope"), "NOT_FOUND", ["nope"]),
        (lambda s: s.is_model_ready("nope"), "NOT_FOUND", ["nope"]),
        (lambda s: s.infer("sinusoidal", [P]), "INVALID_ARGUMENT", ["d_model"]),
        (
            lambda s: s.infer("sinusoidal", [P], parameters={"d_model": 8, "bogus": 1}),
            "INVALID_ARGUMENT",
            ["bogus"],
        ),
        (
            lambda s: s.infer("sinusoidal", [P], parameters={"d_model": "8"}),
            "INVALID_ARGUMENT",
            ["d_model"],
        ),
        (lambda s: s.infer("sinusoidal-apply", [P]), "INVALID_ARGUMENT", ["positions"]),
        (
            lambda s: s.infer(
                "sinusoidal",
                [P],
                outputs=[triton.InferRequestedOutput("rows")],
                parameters={"d_model": 8},
            ),
            "INVALID_ARGUMENT",
            ["rows", "encodings"],
        ),
        (_short, "INVALID_ARGUMENT", ["32 bytes", "40 bytes", "[1, 2, 5]"]),
        (
            lambda s: s.infer("sinusoidal", [ONE], parameters={"d_model": 1 << 17}),
            "RESOURCE_EXHAUSTED",
            ["PE_MAX_WIDTH"],
        ),
        # gRPC keeps an answer until it is read: at most a body's bytes (REST has more)
        (
            lambda s: s.infer("sinusoidal", [P], parameters={"d_model": 65536, "dtype": "float64"}),
            "RESOURCE_EXHAUSTED",
            ["answer", "PE_MAX_BODY_BYTES", "REST"],
        ),
        # models are not loaded nor unloaded: every one is served from the start
        (lambda s: s.load_model("rotary"), "UNIMPLEMENTED", []),
    ],
)
def test_errors_reach_the_client_with_code_and_message(
    server: Any, call: Any, status: str, words: list[str]
) -> None:
    error = refused(lambda: call(server))
    assert error.status() == f"StatusCode.{status}"
    for word in words:
        assert word in error.message()


@pytest.mark.parametrize(
    ("field", "datatype", "values", "words"),
    [
        ("fp32_contents", "FP16", [0.0] * 6, ["FP16", "raw_input_contents"]),
        ("fp32_contents", "FP32", [0.0] * 5, ["5 numbers", "takes 6"]),
        ("int64_contents", "FP32", [0] * 6, ["int64_contents", "fp32_contents"]),
    ],
)
def test_typed_contents_are_checked(
    stub: Any, field: str, datatype: str, values: list[Any], words: list[str]
) -> None:
    request = pb.ModelInferRequest(model_name="sinusoidal-apply")
    given = request.inputs.add(name="embeddings", datatype=datatype, shape=[1, 2, 3])
    getattr(given.contents, field).extend(values)
    with pytest.raises(grpc.RpcError) as caught:
        stub.ModelInfer(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    for word in words:
        assert word in (caught.value.details() or "")


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_message_over_the_body_limit_is_refused(server: Any, compression: str | None) -> None:
    """gRPC itself refuses it (before it is read), compressed or not."""
    x = np.zeros((1, 1024, 512), np.float32)  # 2 MiB, over PE_MAX_BODY_BYTES (1 MiB)
    error = refused(
        lambda: server.infer(
            "sinusoidal-apply", [tensor("embeddings", x, "FP32")], compression_algorithm=compression
        )
    )
    assert error.status() == "StatusCode.RESOURCE_EXHAUSTED"
    # a message within the limit is answered
    small = np.zeros((1, 256, 512), np.float32)
    answered = server.infer("sinusoidal-apply", [tensor("embeddings", small, "FP32")])
    assert answered.as_numpy("embeddings").shape == small.shape


# a real server of its own, the full run's: the fast loop's gRPC server (the live fixture)
# is checked to listen on its two ports alone
@pytest.mark.slow
def test_without_a_grpc_port_nothing_more_listens() -> None:
    with serving() as (url, process):
        assert listening_ports(process.pid) == {int(url.rsplit(":", 1)[1])}


@pytest.mark.slow  # a started process's modules: the full run's
def test_without_a_grpc_port_grpc_is_not_even_imported() -> None:
    """The app starts without the extra: gRPC is imported only for PE_GRPC_PORT."""
    loaded = modules_of_a_started_app()
    assert "service.inference.serving" in loaded
    assert not {name for name in loaded if name.split(".")[0] in ("grpc", "tritonclient")}
    assert "service.inference.grpc" not in loaded


@pytest.mark.slow  # a fresh interpreter: the full run's
def test_the_grpc_wire_imports_no_web_framework() -> None:
    code = "import sys, service.inference.grpc_wire; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    web = ("fastapi", "starlette", "uvicorn", "httpx", "pydantic", "anyio")
    assert not {name for name in out.stdout.split() if name.split(".")[0] in web}


@pytest.mark.slow
def test_a_taken_port_stops_the_start_up() -> None:
    """Even one taken with SO_REUSEPORT (as another gRPC server takes it): a single worker
    does not share its port unawares."""

    def start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "service"], env=env, capture_output=True, text=True, timeout=30
        )

    assert_a_taken_port_stops_the_start_up(start)


def test_a_taken_port_stops_main() -> None:
    """The same, by ``main`` in this process (the fast loop's)."""

    def start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        done = main_in_process(env=env)
        return subprocess.CompletedProcess(
            done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
        )

    assert_a_taken_port_stops_the_start_up(start)


def assert_a_taken_port_stops_the_start_up(
    start: Callable[[dict[str, str]], subprocess.CompletedProcess[str]],
) -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = start({**os.environ, "PE_PORT": str(free_port()), "PE_GRPC_PORT": str(port)})
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1  # one line, no traceback
    assert f"PE_GRPC_PORT={port}: 127.0.0.1:{port} is in use" in out.stderr


# a process, as tests/test_startup.py's test_grpc_without_its_extra_stops_the_start, which
# the fast loop runs
@pytest.mark.slow
def test_without_the_extra_the_start_up_says_to_install_it() -> None:
    code = "import sys; sys.modules['grpc'] = None; from service.__main__ import main; main()"
    env = {**os.environ, "PE_PORT": str(free_port()), "PE_GRPC_PORT": str(free_port())}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30, cwd=ROOT
    )
    assert out.returncode != 0
    assert "the grpc extra is not installed" in out.stderr
    assert "pip install '.[grpc]'" in out.stderr


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.slow
def test_several_workers_share_the_port() -> None:
    """Each worker process listens on PE_GRPC_PORT (SO_REUSEPORT): the kernel spreads the
    connections over them."""
    port = free_port()
    with serving({"PE_WORKERS": "2", "PE_GRPC_PORT": str(port)}) as (url, process):
        http_port = int(url.rsplit(":", 1)[1])
        # the worker processes hold the HTTP socket (multiprocessing's helper does not)
        workers = [pid for pid in _children(process.pid) if http_port in listening_ports(pid)]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
            port in listening_ports(pid) for pid in workers
        ):
            time.sleep(0.1)
        assert len(workers) == 2
        assert all(port in listening_ports(pid) for pid in workers)
        for _ in range(4):
            client = triton.InferenceServerClient(f"127.0.0.1:{port}")
            assert client.infer("sinusoidal", [P], parameters={"d_model": 8}).as_numpy(
                "encodings"
            ).shape == (4, 8)
            client.close()


@pytest.mark.slow
def test_sigterm_lets_in_flight_calls_finish() -> None:
    """A slow call (about two seconds) is in flight when SIGTERM arrives: it is answered
    in full, then the process exits cleanly and the port is closed."""
    port = free_port()
    positions = tensor("positions", np.arange(2048, dtype=np.int64), "INT64")
    parameters = {"d_model": 4096, "rounding": "exact", "dtype": "float64"}
    results: list[Any] = []
    with serving({"PE_GRPC_PORT": str(port), "PE_CACHE_BYTES": "0"}) as (_, process):
        client = triton.InferenceServerClient(f"127.0.0.1:{port}")
        slow = threading.Thread(
            target=lambda: results.append(
                client.infer("sinusoidal", [positions], parameters=parameters)
            )
        )
        slow.start()
        time.sleep(0.5)  # the call is being computed
        process.send_signal(signal.SIGTERM)
        slow.join(60)
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    assert results[0].as_numpy("encodings").shape == (2048, 4096)
    client.close()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (UnknownModel("no model"), grpc.StatusCode.NOT_FOUND),
        (InvalidInput("x", "bad"), grpc.StatusCode.INVALID_ARGUMENT),
        (MalformedBody("bad"), grpc.StatusCode.INVALID_ARGUMENT),
        (LimitExceeded("rows", 2, 1, "PE_MAX_ELEMENTS"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (BodyTooLarge("body", 2, 1, "PE_MAX_BODY_BYTES"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (ClientGone("gone"), grpc.StatusCode.CANCELLED),
    ],
)
def test_the_services_errors_have_grpc_codes(error: Any, status: grpc.StatusCode) -> None:
    assert front.code(error) is status


class Context:
    """What a servicer's call is given: here, the status and details it sets."""

    code: grpc.StatusCode | None = None
    details = ""

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details


class Broken:
    """A runtime whose work fails unexpectedly."""

    limits = Limits.of(Settings())
    posted = Budget(1 << 30)

    async def compute(self, elements: int, work: Any, *args: Any) -> Any:
        raise RuntimeError("secret internals")


def test_an_unexpected_failure_is_internal_logged_and_not_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    servicer = front.Servicer(Broken(), Repository.of(FAMILIES))  # type: ignore[arg-type]
    context = Context()
    assert asyncio.run(servicer.model_infer(b"", context)) == b""  # type: ignore[arg-type]
    assert context.code is grpc.StatusCode.INTERNAL
    assert "secret" not in context.details
    assert "it has been logged" in context.details
    assert "secret internals" in caplog.text


def test_ipv6_hosts_are_bracketed() -> None:
    assert front.address("::1", 8001) == "[::1]:8001"
    assert front.address("0.0.0.0", 8001) == "0.0.0.0:8001"


# the fast loop has it by main in process (tests/test_startup.py, PE_GRPC_PORT=8001+PE_PORT=8001)
@pytest.mark.slow
def test_the_grpc_port_is_not_the_http_port() -> None:
    port = free_port()
    env = {**os.environ, "PE_PORT": str(port), "PE_GRPC_PORT": str(port)}
    out = subprocess.run(
        [sys.executable, "-m", "service"], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode != 0
    assert "is HTTP's (PE_PORT)" in out.stderr


def test_typed_contents_and_inputs_are_counted_before_they_are_read() -> None:
    from service.errors import Limit
    from service.inference import grpc_wire

    numbers = Limit(10, "PE_MAX_JSON_ELEMENTS")
    message = pb.ModelInferRequest(model_name="sinusoidal")
    spec = message.inputs.add(name="positions", datatype="INT64", shape=[11])
    spec.contents.int64_contents.extend(range(11))
    with pytest.raises(LimitExceeded, match="PE_MAX_JSON_ELEMENTS"):
        grpc_wire.request(message, [], numbers)
    many = pb.ModelInferRequest(model_name="sinusoidal")
    for index in range(100):
        many.inputs.add(name=f"p{index}", datatype="INT64", shape=[0])
    with pytest.raises(InvalidInput, match="at most"):
        grpc_wire.request(many, [], numbers)
    huge = pb.ModelInferRequest(model_name="sinusoidal-apply")
    huge.inputs.add(name="embeddings", datatype="FP32", shape=[0, 2**62, 2**62])
    with pytest.raises(InvalidInput, match=r"embeddings\.shape"):
        grpc_wire.request(huge, [memoryview(b"")], numbers)
