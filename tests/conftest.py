"""Fixtures: the app built from settings, in process and as a real ``python -m service``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from service.settings import Settings

# Limits small enough that tests can cross them cheaply.
SMALL_LIMITS = {
    "max_elements": 100_000,
    "max_json_elements": 1_000,
    "cache_bytes": 200_000,
    "max_body_bytes": 100_000,
}
SMALL = {f"PE_{name.upper()}": str(value) for name, value in SMALL_LIMITS.items()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running(
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    ready: str = "/healthz",
    log_path: Path | None = None,
) -> Iterator[str]:
    """A real service process on a free loopback port; yields its base URL. Its output
    goes to ``log_path`` if given."""
    with serving(env, command, ready, log_path) as (url, _):
        yield url


@contextmanager
def serving(
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    ready: str = "/healthz",
    log_path: Path | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """:func:`running`, yielding the process too."""
    port = free_port()
    full_env = {**os.environ, "PE_HOST": "127.0.0.1", "PE_PORT": str(port), **(env or {})}
    argv = command or [sys.executable, "-m", "service"]
    with log_path.open("w+b") if log_path else tempfile.TemporaryFile() as log:
        process = subprocess.Popen(argv, env=full_env, stdout=log, stderr=subprocess.STDOUT)
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


def _wait_for(url: str, process: subprocess.Popen[bytes], log: Any) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            pytest.fail(f"server exited with {process.returncode}:\n{log.read().decode()}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    pytest.fail(f"server did not answer {url} within 30 s")


@pytest.fixture(scope="session")
def live_url() -> Iterator[str]:
    with running() as url:
        yield url


@pytest.fixture(scope="session")
def small_live_url() -> Iterator[str]:
    with running(SMALL) as url:
        yield url


@contextmanager
def client(kind: str, url: str, settings: Settings) -> Iterator[Any]:
    """httpx to the real server at ``url``, or the app built from ``settings`` in process."""
    if kind == "live":
        with httpx.Client(base_url=url, timeout=60) as http:
            yield http
    else:
        with TestClient(create_app(settings)) as app:
            yield app


@pytest.fixture(params=["live", "in-process"])
def api(request: pytest.FixtureRequest, live_url: str) -> Iterator[Any]:
    """An HTTP client for the service with default settings."""
    with client(request.param, live_url, Settings()) as http:
        yield http


@pytest.fixture(params=["live", "in-process"])
def small_api(request: pytest.FixtureRequest, small_live_url: str) -> Iterator[Any]:
    """The same with small limits (``SMALL``)."""
    with client(request.param, small_live_url, Settings.model_validate(SMALL_LIMITS)) as http:
        yield http
