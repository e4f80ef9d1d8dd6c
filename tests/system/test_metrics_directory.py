"""The metrics directory of ``python -m service`` with ``PE_WORKERS=2``, when its processes
are killed: a killed supervisor's is removed by its last worker, and an instance killed
whole leaves one that the next start removes, never another live instance's."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.support import serving
from tests.system.test_processes import alive, children

pytestmark = pytest.mark.slow


def both_workers(url: str, spawned: set[int]) -> None:
    """Until each worker has answered (each has started, and holds the directory)."""
    seen: set[int] = set()
    for _ in range(200):  # new connections, until both workers have answered one
        with httpx.Client(timeout=10) as http:
            seen.add(http.get(url + "/v1/cache").json()["worker"])
        if len(seen) == 2:
            break
    assert len(seen) == 2
    assert seen <= spawned


def gone(pids: set[int]) -> None:
    """Until none of ``pids`` runs (a worker stops within seconds of its supervisor)."""
    deadline = time.monotonic() + 30
    while (left := {pid for pid in pids if alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"still running 30 s after their supervisor was killed: {left}"


def made(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("pe-metrics-*"))


def test_a_killed_supervisor_leaves_no_metrics_directory(tmp_path: Path) -> None:
    """One was left in the temporary directory at every SIGKILL of the supervisor."""
    with serving({"PE_WORKERS": "2", "TMPDIR": str(tmp_path)}) as (url, process):
        spawned = children(process.pid)  # the workers and multiprocessing's helper
        both_workers(url, spawned)
        assert len(made(tmp_path)) == 1
        process.kill()
        process.wait()
        try:
            gone(spawned)
        finally:
            for pid in spawned:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    assert made(tmp_path) == []


def test_an_instance_killed_whole_leaves_a_directory_the_next_start_removes(
    tmp_path: Path,
) -> None:
    env = {"PE_WORKERS": "2", "TMPDIR": str(tmp_path)}
    with serving(env) as (url, process):
        spawned = children(process.pid)
        both_workers(url, spawned)
        # stopped first, so that it starts no worker in place of the killed ones
        process.send_signal(signal.SIGSTOP)
        for pid in spawned:
            os.kill(pid, signal.SIGKILL)
        process.kill()
        process.wait()
        gone(spawned)
    [left] = made(tmp_path)
    with serving(env) as (url, live):
        [mine] = made(tmp_path)
        assert mine != left
        assert mine.startswith(f"pe-metrics-{live.pid}-")
        with serving(env):  # a start beside a live instance
            assert len(made(tmp_path)) == 2
            assert mine in made(tmp_path)
        assert made(tmp_path) == [mine]
        assert httpx.get(url + "/metrics").status_code == 200
    assert made(tmp_path) == []
