"""``python -m service`` refuses settings it cannot start with before it serves: one line on
standard error naming the ``PE_`` variable and what it takes, exit status 2, no traceback.

Each refusal is checked twice: by the command's ``main`` in this process (the fast loop),
and by a real ``python -m service``, one or two in the fast loop and the rest among the slow
tests (a process costs an interpreter's start and the service's imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import ROOT, main_in_process

Start = Callable[[dict[str, str]], subprocess.CompletedProcess[str]]


def environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` over a clean environment (no other ``PE_`` variable) and an ephemeral port."""
    clean = {key: value for key, value in os.environ.items() if not key.upper().startswith("PE_")}
    return {**clean, "PE_HOST": "127.0.0.1", "PE_PORT": "0", **env}


def start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m service`` with ``environment(env)``; it is expected to exit before it
    serves."""
    return subprocess.run(
        [sys.executable, "-m", "service"],
        env=environment(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def start_in_process(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """What :func:`start` runs, ``main`` of ``python -m service``, in this process."""
    done = main_in_process(env=environment(env))
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def assert_one_line(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode == 2, done
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


BAD = [
    # unknown names, with the nearest setting
    ({"PE_CACHE_SIZE": "1"}, ["PE_CACHE_SIZE is not a setting", "did you mean PE_CACHE_BYTES?"]),
    ({"PE_PRELOADS": "4x4"}, ["PE_PRELOADS is not a setting", "did you mean PE_PRELOAD?"]),
    ({"PE_GRPC": "8001"}, ["PE_GRPC is not a setting", "did you mean PE_GRPC_PORT?"]),
    ({"PE_COLOUR": "blue"}, ["PE_COLOUR is not a setting", "docs/settings.md"]),
    # malformed values: the variable, the value and the accepted form
    ({"PE_PORT": "80a"}, ["PE_PORT='80a' is not valid: an integer from 0 to 65535"]),
    ({"PE_PORT": "70000"}, ["PE_PORT='70000'", "from 0 to 65535"]),
    ({"PE_WORKERS": "0"}, ["PE_WORKERS='0'", "an integer of at least 1"]),
    ({"PE_MAX_POSITION": "4294967296"}, ["PE_MAX_POSITION", "from 0 to 2147483647"]),
    ({"PE_HEAD_TIMEOUT": "soon"}, ["PE_HEAD_TIMEOUT='soon'", "a finite number greater than 0"]),
    ({"PE_BODY_TIMEOUT": "nan"}, ["PE_BODY_TIMEOUT='nan'", "a finite number"]),
    ({"PE_LOG_LEVEL": "loud"}, ["PE_LOG_LEVEL='loud'", "one of critical, error, warning"]),
    ({"PE_LOG_FORMAT": "xml"}, ["PE_LOG_FORMAT='xml'", "one of text, json"]),
    ({"PE_CORS_ORIGINS": "example.com"}, ["PE_CORS_ORIGINS", "is not an origin"]),
    # byte sizes
    ({"PE_CACHE_BYTES": "2GB"}, ["PE_CACHE_BYTES='2GB'", "KiB, MiB, GiB or TiB"]),
    ({"PE_MAX_BODY_BYTES": "1.5GiB"}, ["PE_MAX_BODY_BYTES='1.5GiB'", "512MiB"]),
    ({"PE_SLOW_CLIENT_BYTES": "-1MiB"}, ["PE_SLOW_CLIENT_BYTES='-1MiB'", "at least 0"]),
    ({"PE_MAX_CONFIG_BYTES": "0KiB"}, ["PE_MAX_CONFIG_BYTES='0KiB'", "at least 1"]),
    ({"PE_MIN_READ_RATE": "lots"}, ["PE_MIN_READ_RATE='lots'", "a byte size greater than 0"]),
    # the tables to preload
    ({"PE_PRELOAD": "4y4"}, ["PE_PRELOAD", "'4y4'", "MAXLENxDMODEL"]),
    ({"PE_PRELOAD": "4x4:float8"}, ["PE_PRELOAD", "'4x4:float8'"]),
    ({"PE_PRELOAD": "1000000x512"}, ["PE_PRELOAD", "over the limit", "PE_MAX_ELEMENTS"]),
    (
        {"PE_PRELOAD": "65536x512", "PE_CACHE_BYTES": "64MiB"},
        ["PE_PRELOAD", "PE_CACHE_BYTES", "67,108,864"],
    ),
    ({"PE_PRELOAD": "4x4", "PE_MAX_WIDTH": "2"}, ["PE_PRELOAD", "PE_MAX_WIDTH"]),
    ({"PE_GRPC_PORT": "8001", "PE_PORT": "8001"}, ["PE_GRPC_PORT=8001 is HTTP's (PE_PORT)"]),
    # all the bodies held at once, less than one
    ({"PE_POSTED_BYTES": "32MiB"}, ["PE_POSTED_BYTES=33554432", "67108864", "PE_MAX_BODY_BYTES"]),
    # several at once: still one line, every one named
    ({"PE_PORT": "x", "PE_WORKERS": "y"}, ["PE_PORT='x'", "PE_WORKERS='y'"]),
    ({"PE_A_B": "1", "PE_CACHEBYTES": "1"}, ["PE_A_B", "PE_CACHEBYTES", "PE_CACHE_BYTES?"]),
]


IDS = ["+".join(f"{k}={v}" for k, v in env.items()) for env, _ in BAD]
# the refusal a real process gives in the fast loop: several at once (main in this process
# gives every one of them there)
IN_THE_FAST_LOOP = {"PE_PORT=x+PE_WORKERS=y"}
# each start-up checked both ways: main in this process in the fast loop, a real process
# among the slow tests
STARTS = [
    pytest.param(start_in_process, id="in-process"),
    pytest.param(start, id="process", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(
    ("env", "words"),
    [
        pytest.param(*case, id=name, marks=() if name in IN_THE_FAST_LOOP else pytest.mark.slow)
        for case, name in zip(BAD, IDS, strict=True)
    ],
)
def test_bad_settings_stop_the_start_with_one_line(env: dict[str, str], words: list[str]) -> None:
    assert_one_line(start(env), *words)


@pytest.mark.parametrize(("env", "words"), BAD, ids=IDS)
def test_bad_settings_stop_main_with_one_line(env: dict[str, str], words: list[str]) -> None:
    assert_one_line(start_in_process(env), *words)


def test_grpc_without_its_extra_stops_the_start(tmp_path: Path) -> None:
    # a grpc package that cannot be imported, first on the path: the extra "not installed"
    (tmp_path / "grpc").mkdir()
    (tmp_path / "grpc" / "__init__.py").write_text("raise ImportError('no grpc here')\n")
    done = start({"PE_GRPC_PORT": "8001", "PYTHONPATH": str(tmp_path)})
    assert_one_line(done, "PE_GRPC_PORT=8001", "grpc extra is not installed", "no grpc here")


def assert_a_metrics_directory_is_checked(start: Start, tmp_path: Path, workers: str) -> None:
    missing = str(tmp_path / "missing")
    for name, value, words in [
        ("PROMETHEUS_MULTIPROC_DIR", missing, ["is not a directory"]),
        ("PROMETHEUS_MULTIPROC_DIR", "", ["PROMETHEUS_MULTIPROC_DIR=''", "not a directory"]),
        ("prometheus_multiproc_dir", missing, ["prometheus_multiproc_dir=", "not a directory"]),
    ]:
        assert_one_line(start({"PE_WORKERS": workers, name: value}), *words)
    used = tmp_path / "used"
    used.mkdir()
    (used / "counter_1.db").write_bytes(b"")
    assert_one_line(
        start({"PE_WORKERS": workers, "PROMETHEUS_MULTIPROC_DIR": str(used)}), "is not empty"
    )


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_metrics_directory_must_be_an_empty_writable_one(tmp_path: Path, workers: str) -> None:
    """prometheus-client's multiprocess directory, if named: a missing one stopped every
    worker at its first request (and uvicorn started them again, for ever); an earlier
    run's files would be counted again."""
    assert_a_metrics_directory_is_checked(start, tmp_path, workers)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_main_takes_only_an_empty_writable_metrics_directory(tmp_path: Path, workers: str) -> None:
    assert_a_metrics_directory_is_checked(start_in_process, tmp_path, workers)


def openapi_in_process(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = main_in_process("openapi", env=env)
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def openapi_in_a_process(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", "openapi"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    "openapi",
    [
        pytest.param(openapi_in_process, id="in-process"),
        pytest.param(openapi_in_a_process, id="process", marks=pytest.mark.slow),
    ],
)
def test_openapi_is_refused_with_the_same_line(openapi: Start) -> None:
    assert_one_line(openapi({**os.environ, "PE_LOG_LEVEL": "loud"}), "PE_LOG_LEVEL='loud'")


@pytest.mark.parametrize("start", STARTS)
def test_with_json_logs_the_refusal_is_a_json_line(start: Start) -> None:
    """PE_LOG_FORMAT=json: every line the service writes is one JSON object, the line
    that refuses a setting too."""
    line = assert_one_line(start({"PE_LOG_FORMAT": "json", "PE_WORKRES": "2"}), "PE_WORKRES")
    entry = json.loads(line)
    assert entry["level"] == "critical"
    assert "PE_WORKERS" in entry["message"]  # the nearest setting
