"""A real service for the client's tests: ``python -m service`` in a process of its own, on a
free loopback port, ready (``/readyz``) before the first test. The interpreter is
``$SERVICE_PYTHON``, else the repository's ``.venv/bin/python``, else this one; the tests fail
(they are not skipped) when the service cannot start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest
from posenc_client import Client

REPOSITORY = Path(__file__).resolve().parents[3]


def _python() -> str:
    if "SERVICE_PYTHON" in os.environ:
        return os.environ["SERVICE_PYTHON"]
    venv = REPOSITORY / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


# How long a test waits for the service: minutes, so that a loaded machine never decides a
# test's outcome, while a hang still ends (tests/support.py's WAIT)
WAIT = 300.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_ready(url: str, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    deadline = time.monotonic() + WAIT
    # one client for every poll: each new one builds a TLS context (some 50 ms of the CPU
    # the starting service needs)
    with httpx.Client(timeout=1) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log.seek(0)
                output = log.read().decode(errors="replace")
                pytest.fail(f"the service exited with {process.returncode}:\n{output}")
            try:
                if http.get(url + "/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    pytest.fail(f"the service did not answer {url}/readyz with 200 within {WAIT:g} s")


@pytest.fixture(scope="session")
def service_url() -> Iterator[str]:
    """The base URL of a real service with default settings."""
    port = _free_port()
    env = {**os.environ, "PE_HOST": "127.0.0.1", "PE_PORT": str(port)}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [_python(), "-m", "service"],
            cwd=REPOSITORY,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_until_ready(url, process, log)
            yield url
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# one client of each kind for the session: each costs its TLS context (certificates read,
# some 50 ms), though it speaks plain HTTP to the service
@pytest.fixture(scope="session")
def pe(service_url: str) -> Iterator[Client]:
    with Client(service_url, timeout=WAIT) as client:
        yield client


@pytest.fixture(scope="session")
def http(service_url: str) -> Iterator[httpx.Client]:
    """Plain httpx to the same service, for answers to compare the client's with."""
    with httpx.Client(base_url=service_url, timeout=WAIT) as client:
        yield client
