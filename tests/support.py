"""What the tests share, and what ``bench/`` and ``docs/`` may use too: the service's paths,
decoders of its answers, ``assert_problem``, a real ``python -m service`` on a free port,
and the app in process behind a plain ``httpx.Client``."""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final
from unittest import mock

import anyio.from_thread
import httpx
import numpy as np
import orjson
from fastapi import FastAPI
from numpy.typing import NDArray
from prometheus_client.parser import text_string_to_metric_families

ROOT: Final = Path(__file__).resolve().parents[1]
TABLE: Final = "/v1/encodings/sinusoidal"
APPLY: Final = TABLE + "/apply"
ROTARY_APPLY: Final = "/v1/encodings/rotary/apply"
# the Open Inference Protocol's names of the float dtypes
DATATYPES: Final = {np.float16: "FP16", np.float32: "FP32", np.float64: "FP64"}
HEATMAP: Final = TABLE + "/heatmap.png"
SIMILARITY: Final = TABLE + "/similarity.png"
PROBLEM: Final = "application/problem+json"
NPY: Final = "application/x-npy"
NPZ: Final = "application/x-npz"
RAW: Final = "application/octet-stream"

# Debian's chromium, for the browser test, the explorer's benchmark and docs/pictures.py.
# Without the background-networking flags it keeps calling hosts this machine cannot reach.
CHROMIUM: Final = os.environ.get("TEST_CHROMIUM", "/usr/bin/chromium")
FLAGS: Final = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# How long a test's client waits for an answer: minutes, so that a loaded machine never
# decides a test's outcome (an audit of 3.4 s idle passed a 10 s timeout under load), while a
# hang still ends. A test about a timeout sets its own.
WAIT: Final = 300.0

# Limits small enough that tests can cross them cheaply.
SMALL_LIMITS: Final = {
    "max_elements": 100_000,
    "max_json_elements": 1_000,
    "cache_bytes": 200_000,
    "max_body_bytes": 100_000,
}
SMALL: Final = {f"PE_{name.upper()}": str(value) for name, value in SMALL_LIMITS.items()}


class Loop:
    """Which loop runs: ``tests/conftest.py`` sets ``inner`` where ``-m`` leaves out every
    slow test (the inner loop, ``-m "not slow"``)."""

    inner = False


def examples(count: int) -> int:
    """A property's example count: ``count`` in the full run, a tenth of it (at least 10)
    in the inner loop, which is run often and must stay short."""
    return max(10, count // 10) if Loop.inner else count


def sample(cases: Iterable[Any], every: int) -> list[Any]:
    """The cases of a large matrix whose cases are alike: the inner loop runs every
    ``every``-th of those it would run (the first among them), the full run all, the rest
    being marked ``slow``. A case is a value, a tuple of the values of several arguments,
    or a ``pytest.param``."""
    import pytest  # only where tests are collected: bench/ and docs/ import this module too
    from _pytest.mark.structures import ParameterSet

    sampled: list[Any] = []
    kept = 0
    for case in cases:
        if isinstance(case, ParameterSet) and any(m.name == "slow" for m in case.marks):
            sampled.append(case)  # the full run's already
            continue
        if kept % every == 0:
            sampled.append(case)
        elif isinstance(case, ParameterSet):
            marks = [*case.marks, pytest.mark.slow]
            sampled.append(pytest.param(*case.values, marks=marks, id=case.id))
        else:
            values = case if isinstance(case, tuple) else (case,)
            sampled.append(pytest.param(*values, marks=pytest.mark.slow))
        kept += 1
    return sampled


@functools.cache
def modules_of_a_started_app() -> frozenset[str]:
    """The modules a fresh interpreter holds once it has built the app (without
    ``PE_GRPC_PORT``) and answered ``/healthz`` in process: run once for the tests of what a
    start leaves unimported (the plotting library, gRPC)."""
    code = (
        "import sys; from service.app import create_app; from tests.support import in_process\n"
        "with in_process(create_app()) as http: assert http.get('/healthz').status_code == 200\n"
        "print(' '.join(sys.modules))"
    )
    env = {key: value for key, value in os.environ.items() if key != "PE_GRPC_PORT"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT, check=True
    )
    return frozenset(out.stdout.split())


def renderers() -> list[list[str]]:
    """The commands that render a kustomization here (deploy/kubernetes, deploy/kserve):
    ``kustomize build``, ``kubectl kustomize`` (kustomize built in)."""
    found = []
    if kustomize := shutil.which("kustomize"):
        found.append([kustomize, "build"])
    if kubectl := shutil.which("kubectl"):
        found.append([kubectl, "kustomize"])
    return found


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the app with default settings (a copy of its own, as JSON
    reads it back): built once a run, as several tests read it."""
    document: dict[str, Any] = json.loads(_openapi_text())
    return document


@functools.cache
def _openapi_text() -> str:
    from service.app import create_app
    from service.settings import Settings

    return json.dumps(create_app(Settings()).openapi())


@functools.cache
def syntax_nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the syntax tree of the Python source at ``path``, in ``ast.walk``'s
    order: parsed once a run, as several tests read every source of the service."""
    return tuple(ast.walk(ast.parse(path.read_text())))


def batch(shape: tuple[int, ...], dtype: str = "float32", seed: int = 0) -> NDArray[Any]:
    """A batch of embeddings: standard normal numbers, the same for the same seed."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def requests_counted(metrics: str) -> dict[tuple[str, str, str], float]:
    """``pe_http_requests_total`` of a ``/metrics`` text, by (method, route, status)."""
    return {
        (s.labels["method"], s.labels["route"], s.labels["status"]): s.value
        for family in text_string_to_metric_families(metrics)
        if family.name == "pe_http_requests"
        for s in family.samples
    }


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails)."""
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def table_url(path: str = TABLE, **params: object) -> str:
    return path + "?" + "&".join(f"{k}={v}" for k, v in params.items())


def load(response: httpx.Response) -> np.ndarray[Any, Any]:
    """The array in a table or apply answer, in any of its formats."""
    kind = response.headers["content-type"]
    if kind == "application/json":
        document = orjson.loads(response.content)
        data = document.get("data", document.get("embeddings"))
        return np.array(data, dtype=document["dtype"])
    if kind == NPY:
        return np.asarray(np.load(io.BytesIO(response.content), allow_pickle=False))
    if kind == NPZ:
        with np.load(io.BytesIO(response.content), allow_pickle=False) as archive:
            return np.asarray(archive["embeddings"])
    assert kind == RAW, kind
    shape = tuple(int(n) for n in response.headers["x-shape"].split(","))
    return np.frombuffer(
        response.content, dtype="<" + np.dtype(response.headers["x-dtype"]).str[1:]
    ).reshape(shape)


def npy_bytes(array: np.ndarray[Any, Any]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def npz_bytes(**arrays: np.ndarray[Any, Any]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def assert_problem(response: httpx.Response, status: int, *words: str) -> dict[str, Any]:
    """``response`` is an RFC 9457 problem with ``status`` whose detail has ``words``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    document: dict[str, Any] = response.json()
    assert document["status"] == status
    assert {"type", "title", "status", "detail"} <= document.keys()
    for word in words:
        assert word in document["detail"], document
    return document


def cache_stats(http: httpx.Client) -> dict[str, Any]:
    stats: dict[str, Any] = http.get("/v1/cache").json()
    return stats


def rss_mib(pid: int) -> float:
    """The resident memory of process ``pid``, in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status)[1]) / 1024  # type: ignore[index]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Llama 3.1's RoPE as GET /v1/encodings/rotary takes it (its config.json's rope_scaling)
LLAMA_31: Final[dict[str, Any]] = {
    "head_dim": 128,
    "base": 500000.0,
    "scaling": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


# The KServe release whose published files (CRDs, the protocol's rest_predict_v2.yaml) the
# tests check against; fetched files are not kept in this repository: the steering
# repository's shared/reference/kserve/<release> holds them, or $TEST_KSERVE_REFERENCE names
# a folder that does.
KSERVE_RELEASE = "v0.20.0"
KSERVE_REFERENCE_VARIABLE = "TEST_KSERVE_REFERENCE"


def kserve_reference() -> Path:
    """Where KServe's pinned files are: ``$TEST_KSERVE_REFERENCE``, else the steering
    repository's shared/reference/kserve/<release>, beside this repository."""
    given = os.environ.get(KSERVE_REFERENCE_VARIABLE)
    return (
        Path(given) if given else ROOT.parent / "shared" / "reference" / "kserve" / KSERVE_RELEASE
    )


@contextmanager
def serving(
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    ready: str = "/healthz",
    log_path: Path | None = None,
    cwd: Path | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A real service process on a free loopback port: its base URL and the process. Its
    output goes to ``log_path`` if given; ``cwd`` (another checkout) runs its code instead."""
    port = free_port()
    full_env = {**os.environ, "PE_HOST": "127.0.0.1", "PE_PORT": str(port), **(env or {})}
    argv = command or [sys.executable, "-m", "service"]
    with log_path.open("w+b") if log_path else tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            argv, env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_for(url + ready, process, log)
            yield url, process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def running(
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    ready: str = "/healthz",
    log_path: Path | None = None,
) -> Iterator[str]:
    """:func:`serving`, yielding the base URL only."""
    with serving(env, command, ready, log_path) as (url, _):
        yield url


def main_in_process(
    *argv: str, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[bytes]:
    """What ``python -m service ARGV`` does, done by its ``main`` in this process (with
    ``env`` as the whole environment, if given, and ``cwd`` as the working directory): its
    exit status, standard output and error. Where it would serve, an ``AssertionError``:
    the tests that use it expect it to stop before it serves."""
    from service import __main__ as command

    def serve(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("python -m service would serve")

    out, err = io.TextIOWrapper(io.BytesIO()), io.TextIOWrapper(io.BytesIO())
    code: str | int | None = None
    with (
        mock.patch.dict(os.environ, dict(os.environ if env is None else env), clear=True),
        mock.patch.object(sys, "argv", ["python -m service", *argv]),
        mock.patch("uvicorn.run", serve),
        contextlib.chdir(cwd),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            command.main()
        except SystemExit as stopped:
            code = stopped.code
        if isinstance(code, str):  # as the interpreter exits with it
            sys.stderr.write(code + "\n")
    for stream in (out, err):
        stream.flush()
    return subprocess.CompletedProcess(
        ["python", "-m", "service", *argv],
        code if isinstance(code, int) else 0 if code is None else 1,
        out.buffer.getvalue(),
        err.buffer.getvalue(),
    )


def _wait_for(url: str, process: subprocess.Popen[bytes], log: Any) -> None:
    deadline = time.monotonic() + WAIT
    # one client for every poll: each new one builds a TLS context (some 50 ms of the CPU
    # the starting server needs), though it speaks plain HTTP
    with httpx.Client(timeout=1) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log.seek(0)
                output = log.read().decode()
                raise RuntimeError(f"server exited with {process.returncode}:\n{output}")
            try:
                if http.get(url).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    raise RuntimeError(f"server did not answer {url} within {WAIT:g} s")


class _InProcess(httpx.BaseTransport):
    """httpx's own ASGI transport, driven from synchronous code through a portal."""

    def __init__(self, app: FastAPI, portal: anyio.from_thread.BlockingPortal, raise_errors: bool):
        self._asgi = httpx.ASGITransport(app, raise_app_exceptions=raise_errors)
        self._app = app
        self._portal = portal

    def answering_errors(self) -> _InProcess:
        """A transport to the same started app on which an unexpected exception is a 500
        answer, as a real server gives, not the test's error."""
        return _InProcess(self._app, self._portal, raise_errors=False)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def call() -> httpx.Response:
            response = await self._asgi.handle_async_request(request)
            assert isinstance(response.stream, httpx.AsyncByteStream)
            body = b"".join([part async for part in response.stream])
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                stream=httpx.ByteStream(body),
                extensions=response.extensions,
            )

        return self._portal.call(call)


@contextmanager
def started(app: FastAPI, raise_errors: bool = True) -> Iterator[httpx.BaseTransport]:
    """``app`` started (its lifespan runs), and an httpx transport to it in process, for as
    many clients as need it; with ``raise_errors`` an unexpected exception reaches the test."""
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
    ):
        yield _InProcess(app, portal, raise_errors)


def client_of(transport: httpx.BaseTransport, raise_errors: bool = True) -> httpx.Client:
    """An ``httpx.Client`` over a transport of :func:`started`; without ``raise_errors`` an
    unexpected exception is a 500 answer, whatever the transport was started with."""
    if not raise_errors:
        assert isinstance(transport, _InProcess)
        transport = transport.answering_errors()
    return httpx.Client(transport=transport, base_url="http://testserver")


@contextmanager
def in_process(app: FastAPI, raise_errors: bool = True) -> Iterator[httpx.Client]:
    """``app`` started (its lifespan runs) and an ``httpx.Client`` that talks to it in
    process; with ``raise_errors`` an unexpected exception reaches the test."""
    with started(app, raise_errors) as transport, client_of(transport) as http:
        yield http


def protobuf_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, as the wire writes it (field numbers under 16)."""
    size, length = len(payload), bytearray()
    while size >= 0x80:
        length.append(size & 0x7F | 0x80)
        size >>= 7
    length.append(size)
    return bytes([number << 3 | 2]) + bytes(length) + payload
