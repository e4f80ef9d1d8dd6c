"""The service as a process: ``python -m service`` and the console script, several
workers, readiness after a large preload, access-log lines, SIGTERM during a request, the
workers of a killed supervisor, a second instance on the same gRPC port."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import tritonclient.grpc as triton
from packaging.version import Version

from tests.support import ROOT, TABLE, WAIT, free_port, running, serving
from tests.test_startup import assert_one_line

pytestmark = pytest.mark.slow


def test_the_console_script_starts_the_service() -> None:
    script = shutil.which("pe-service", path=str(Path(sys.executable).parent))
    assert script is not None
    with running(command=[script]) as url:
        assert httpx.get(url + "/healthz", timeout=WAIT).json() == {"status": "ok"}


def test_several_workers_serve() -> None:
    with running({"PE_WORKERS": "2"}) as url:
        for _ in range(10):
            assert (
                httpx.get(
                    url + "/v1/encodings/sinusoidal?max_len=4&d_model=4", timeout=WAIT
                ).status_code
                == 200
            )


def test_readyz_waits_for_the_preload() -> None:
    """Alive at once, ready only when every PE_PRELOAD table is in the cache."""
    env = {"PE_PRELOAD": "16x8, 8192x8192:float64", "PE_CACHE_BYTES": str(600 << 20)}
    seen = []
    with running(env) as url:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = httpx.get(url + "/readyz", timeout=WAIT).status_code
            seen.append(status)
            if status == 200:
                break
            assert status == 503
            assert httpx.get(url + "/healthz", timeout=WAIT).status_code == 200
            time.sleep(0.02)
        stats = httpx.get(url + "/v1/cache", timeout=WAIT).json()
    assert seen[0] == 503
    assert seen[-1] == 200
    tables = {(t["key"]["d_model"], t["key"]["dtype"]): t for t in stats["tables"]}
    assert tables.keys() == {(8, "float32"), (8192, "float64")}
    wide = tables[8192, "float64"]
    assert wide["pages"] * wide["page_rows"] == 8192  # every row of the preloaded table
    assert stats["misses"] == 1 + wide["pages"]


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_one_access_log_line_per_request(tmp_path: Path, log_format: str) -> None:
    log = tmp_path / "server.log"
    with running({"PE_LOG_FORMAT": log_format}, log_path=log) as url:
        httpx.get(url + TABLE + "?max_len=3&d_model=3&format=npy", timeout=WAIT)
        httpx.get(url + "/nope", timeout=WAIT)
    lines = [line for line in log.read_text().splitlines() if TABLE in line or "/nope" in line]
    assert len(lines) == 2
    if log_format == "json":
        records = [json.loads(line) for line in log.read_text().splitlines()]  # every line
        access = [r for r in records if r["logger"] == "service.access"]
        assert [(r["path"], r["status"]) for r in access if r["path"] != "/healthz"] == [
            (TABLE, 200),
            ("/nope", 404),
        ]
        assert access[-1]["route"] == "unmatched"
        assert all(r["duration_ms"] >= 0 and r["bytes"] > 0 for r in access)
        # every line's time is ISO 8601 with its zone, access lines and the others alike
        for record in records:
            moment = datetime.datetime.fromisoformat(record["time"])
            assert moment.utcoffset() is not None, record["time"]
            assert moment.microsecond % 1000 == 0  # milliseconds
    else:
        assert '"GET /v1/encodings/sinusoidal?max_len=3&d_model=3&format=npy" 200' in lines[0]
        assert '"GET /nope" 404' in lines[1]


def test_sigterm_lets_in_flight_requests_finish() -> None:
    """A slow cold table is in flight when SIGTERM arrives: it is answered in full, then the
    process exits cleanly."""
    results: list[httpx.Response] = []
    with serving({"PE_CACHE_BYTES": str(1 << 30)}) as (url, process):
        query = "?max_len=8192&d_model=8192&dtype=float64&format=npy"
        slow = threading.Thread(
            target=lambda: results.append(httpx.get(url + TABLE + query, timeout=WAIT))
        )
        slow.start()
        time.sleep(0.3)  # the request is being computed
        process.send_signal(signal.SIGTERM)
        slow.join(60)
        # uvicorn re-raises the signal once it has shut down cleanly
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    assert results[0].status_code == 200
    assert len(results[0].content) > 8192 * 8192 * 8
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/healthz", timeout=WAIT)


def children(pid: int) -> set[int]:
    return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_workers_stop_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    """uvicorn's supervisor killed with SIGKILL: its workers, which serve the port, stop
    gracefully within seconds rather than serve on with nothing to stop them (a restart
    failed with "address in use" while /healthz answered)."""
    log = tmp_path / "server.log"
    # TMPDIR: its metrics directory apart from any other instance's
    env = {"PE_WORKERS": "2", "TMPDIR": str(tmp_path)}
    with serving(env, log_path=log) as (url, process):
        port = int(url.rsplit(":", 1)[1])
        spawned = children(process.pid)  # the workers and multiprocessing's helper
        workers: set[int] = set()
        for _ in range(200):  # new connections, until both workers have answered one
            with httpx.Client(timeout=WAIT) as http:
                workers.add(http.get(url + "/v1/cache").json()["worker"])
            if len(workers) == 2:
                break
        assert len(workers) == 2
        assert workers <= spawned
        process.kill()
        process.wait()
        deadline = time.monotonic() + 10
        try:
            while (left := {pid for pid in spawned if alive(pid)}) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not left, f"still running 10 s after their supervisor was killed: {left}"
        finally:
            for pid in spawned:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/healthz", timeout=WAIT)
    with socket.socket() as sock:  # as uvicorn binds it: only a listening socket stops it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    # each worker shut down as uvicorn does on SIGTERM, not cut off
    text = log.read_text()
    assert text.count("is gone: this worker stops") == 2, text
    for pid in workers:
        assert f"Finished server process [{pid}]" in text, text


def start_another(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m service`` with ``env`` over a clean environment, expected to exit before
    it serves; if it serves instead, stopped (SIGTERM: its supervisor stops its workers)."""
    clean = {key: value for key, value in os.environ.items() if not key.upper().startswith("PE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "service"],
        env={**clean, **env},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
        pytest.fail(f"a second instance started on the same gRPC port:\n{stderr}")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def grpc_live(port: int) -> bool:
    """ServerLive on a connection of its own (gRPC shares them between channels unless
    told otherwise), so that the kernel may hand it to any socket on the port."""
    client = triton.InferenceServerClient(
        f"127.0.0.1:{port}", channel_args=[("grpc.use_local_subchannel_pool", 1)]
    )
    try:
        return bool(client.is_server_live(client_timeout=5))
    finally:
        client.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "::"])
def test_a_second_instance_cannot_share_the_grpc_port(tmp_path: Path, host: str) -> None:
    """The workers share PE_GRPC_PORT (SO_REUSEPORT): another instance of the same user
    asking the same way would have taken part of the calls unseen. It stops at start-up
    instead, with one or several workers, and the first serves every call."""
    grpc_port = free_port()
    env = {"PE_HOST": host, "PE_GRPC_PORT": str(grpc_port), "TMPDIR": str(tmp_path)}
    with serving({**env, "PE_WORKERS": "2"}):
        assert grpc_live(grpc_port)
        for workers in ("2", "1"):
            done = start_another({**env, "PE_WORKERS": workers, "PE_PORT": str(free_port())})
            assert_one_line(done, f"PE_GRPC_PORT={grpc_port}", "in use", "another instance")
        # what holds the port against others takes no connection from the workers
        for _ in range(20):
            assert grpc_live(grpc_port)


def test_the_lowest_uvicorn_the_package_accepts_serves(tmp_path: Path) -> None:
    """The floor in pyproject.toml is a version that runs the service: uvicorn 0.30 to 0.35,
    which it allowed, stopped at start-up (the protocol is named by an import string)."""
    floor = re.search(r'"uvicorn\[standard\]>=([0-9.]+),', (ROOT / "pyproject.toml").read_text())
    assert floor is not None
    target = tmp_path / "lowest"
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target"]
    subprocess.run(
        [*install, str(target), f"uvicorn=={floor[1]}"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {"PYTHONPATH": str(target)}
    with running(env) as url:
        assert httpx.get(url + TABLE + "?max_len=4&d_model=4", timeout=WAIT).status_code == 200
        version = subprocess.run(
            [sys.executable, "-c", "import uvicorn; print(uvicorn.__version__)"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        )
    assert Version(version.stdout.strip()) == Version(floor[1])
