"""gRPC messages a hostile client sends, against a real ``python -m service`` with
``PE_GRPC_PORT``: bombs of repeated fields are refused before protobuf builds them (the
process stays near its idle size, and ``/healthz`` keeps answering), messages count in
``PE_POSTED_BYTES`` as REST bodies do, and a refused message leaves nothing behind."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb

from service.errors import InvalidInput, Limit
from service.inference import grpc as front
from tests.support import APPLY, NPY, free_port, npy_bytes, rss_mib, serving
from tests.support import protobuf_field as field

pytestmark = pytest.mark.slow
METHOD = "/inference.GRPCInferenceService/ModelInfer"
MiB = 1 << 20


NAMED = field(1, b"sinusoidal")  # the model: the bombs are read as its requests


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, str, int]]:
    """The service's URL, its gRPC address and its pid; 1 MiB bodies, 2 MiB of them at once."""
    port = free_port()
    env = {
        "PE_GRPC_PORT": str(port),
        "PE_MAX_BODY_BYTES": str(MiB),
        "PE_POSTED_BYTES": str(2 * MiB),
        "PE_MAX_CONFIG_BYTES": str(MiB),
    }
    with serving(env) as (url, process):
        yield url, f"127.0.0.1:{port}", process.pid


def call(address: str, message: bytes, compression: Any = None) -> tuple[Any, str]:
    """The status code and details of one ModelInfer call with ``message``'s bytes."""
    with grpc.insecure_channel(address) as channel:
        infer: Any = channel.unary_unary(METHOD)
        try:
            infer(message, timeout=60, compression=compression)
        except grpc.RpcError as error:
            return error.code(), str(error.details())
    return grpc.StatusCode.OK, ""


def sinusoidal(rows: int) -> bytes:
    message = pb.ModelInferRequest(model_name="sinusoidal")
    message.parameters["d_model"].int64_param = 8
    message.inputs.add(name="positions", datatype="INT64", shape=[rows])
    message.raw_input_contents.append(np.arange(rows, dtype=np.int64).tobytes())
    data: bytes = message.SerializeToString()
    return data


@pytest.mark.parametrize(
    ("message", "words"),
    [
        # 1 MiB of empty outputs entries, gzip-compressed to ~1 KiB: half a million
        # messages for protobuf to build
        pytest.param(field(6, b"") * (MiB // 2 - 8), ["outputs", "more than 8"], id="outputs"),
        pytest.param(
            field(5, field(3, b"\x01" * (MiB - 64))), ["inputs[0].shape"], id="shape-dims"
        ),
        pytest.param(b"\x78\x01" * (MiB // 2 - 8), ["1,024 fields"], id="unknown-fields"),
    ],
)
def test_bombs_are_refused_before_they_are_built(
    live: tuple[str, str, int], message: bytes, words: list[str]
) -> None:
    url, address, pid = live
    call(address, NAMED + message, grpc.Compression.Gzip)  # gRPC's own buffers, warmed up
    before = rss_mib(pid)
    sizes = []
    latencies: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            while not done.is_set():
                sent = time.monotonic()
                assert http.get("/healthz").status_code == 200
                latencies.append(time.monotonic() - sent)
                time.sleep(0.01)

    watcher = threading.Thread(target=probe)
    watcher.start()
    try:
        for _ in range(8):
            code, details = call(address, NAMED + message, grpc.Compression.Gzip)
            sizes.append(rss_mib(pid) - before)
            assert code is grpc.StatusCode.INVALID_ARGUMENT, (details, sizes)
            for word in words:
                assert word in details
    finally:
        done.set()
        watcher.join()
    # the messages themselves (1 MiB each, held by gRPC) and nothing built from them
    assert rss_mib(pid) - before < 48, sizes
    assert latencies  # /healthz answered all along
    assert sinusoidal_answers(address)


def sinusoidal_answers(address: str) -> bool:
    return call(address, sinusoidal(4))[0] is grpc.StatusCode.OK


def test_messages_count_in_the_posted_bytes_budget(live: tuple[str, str, int]) -> None:
    """Two REST bodies that hold PE_POSTED_BYTES leave no room for a message: UNAVAILABLE,
    naming the setting; once they are answered, the message is served."""
    url, address, _ = live
    host, port = url.removeprefix("http://").split(":")
    body = npy_bytes(np.zeros((1, 1, (MiB - 256) // 4), np.float32))
    head = (
        f"POST {APPLY} HTTP/1.1\r\nHost: test\r\nContent-Type: {NPY}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    message = sinusoidal(16384)  # 128 KiB of positions, a 512 KiB answer
    socks = [socket.create_connection((host, int(port)), timeout=30) for _ in range(2)]
    try:
        for sock in socks:
            sock.sendall(head + body[:-1])  # all but its last byte: the body is held
        time.sleep(0.5)
        code, details = call(address, message)
        assert code is grpc.StatusCode.UNAVAILABLE, details
        assert "PE_POSTED_BYTES" in details
        for sock in socks:
            sock.sendall(body[-1:])
            assert sock.recv(4096).startswith(b"HTTP/1.1 ")  # answered: the body is let go
    finally:
        for sock in socks:
            sock.close()
    assert call(address, message)[0] is grpc.StatusCode.OK


def test_a_refused_message_is_kept_by_nothing() -> None:
    """The refusal's traceback does not hold the decoded message (it did until the next
    full collection: a refused message kept its memory)."""
    message = pb.ModelInferRequest(model_name="sinusoidal")
    message.inputs.add(name="positions", datatype="NOPE", shape=[1])
    message.raw_input_contents.append(b"\0" * 8)
    with pytest.raises(InvalidInput) as caught:
        front._parse(message.SerializeToString(), Limit(100, "PE_MAX_JSON_ELEMENTS"))
    assert caught.value.__traceback__ is not None
    frame = caught.value.__traceback__.tb_next  # past this test's own frame
    held = []
    while frame is not None:
        held += [type(value).__name__ for value in frame.tb_frame.f_locals.values()]
        frame = frame.tb_next
    assert "ModelInferRequest" not in held
    assert "Scanned" not in held
