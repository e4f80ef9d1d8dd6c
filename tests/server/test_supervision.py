"""The gRPC port held by the supervisor against another instance, on real sockets: the
probe, the socket kept, and what the workers' own sockets (as gRPC binds them) may do
beside it; the metrics directory, held by every process of its instance and removed by
the last, or by a later start. The workers' stop when their supervisor dies is
tests/system/test_processes; a killed supervisor's directory,
tests/system/test_metrics_directory."""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from service.server import supervision
from service.settings import Settings, SettingsError
from tests.support import free_port

HOSTS = [pytest.param("127.0.0.1", id="ipv4"), pytest.param("::", id="ipv6-any")]


def family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def grpc_like(host: str, port: int) -> socket.socket:
    """A worker's gRPC listening socket, with the options gRPC gives it for several."""
    sock = socket.socket(family(host), socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen()
    return sock


def test_nothing_is_held_without_grpc() -> None:
    assert supervision.hold_grpc_port(Settings(workers=2)) is None


@pytest.mark.parametrize("host", HOSTS)
def test_the_port_is_held_against_another_instance_not_the_workers(host: str) -> None:
    port = free_port()
    keeper = supervision.hold_grpc_port(Settings(host=host, grpc_port=port, workers=2))
    assert keeper is not None
    with keeper:
        # before any worker listens, another instance (several workers or one) stops
        for workers in (2, 1):
            with pytest.raises(SettingsError, match=f"PE_GRPC_PORT={port}: .* is in use"):
                supervision.hold_grpc_port(Settings(host=host, grpc_port=port, workers=workers))
        listening = [grpc_like(host, port) for _ in range(2)]
        for sock in listening:
            sock.settimeout(0)
        # every connection goes to a worker's socket: the one held never listens
        connections = [socket.create_connection(("127.0.0.1", port)) for _ in range(32)]
        time.sleep(0.1)
        accepted = 0
        for sock in listening:
            while True:
                try:
                    sock.accept()[0].close()
                except BlockingIOError:
                    break
                accepted += 1
        assert accepted == len(connections)
        for sock in [*connections, *listening]:
            sock.close()
    # the supervisor gone, the port is free for the next
    again = supervision.hold_grpc_port(Settings(host=host, grpc_port=port, workers=2))
    assert again is not None
    again.close()


def test_one_process_holds_nothing_but_is_refused_a_port_in_use() -> None:
    port = free_port()
    assert supervision.hold_grpc_port(Settings(grpc_port=port)) is None
    with (
        socket.create_server(("127.0.0.1", port)),
        pytest.raises(SettingsError, match="is in use"),
    ):
        supervision.hold_grpc_port(Settings(grpc_port=port))


@pytest.mark.parametrize("reuseport", [False, True], ids=["one-process", "several-workers"])
def test_an_earlier_runs_connections_in_time_wait_do_not_stop_the_start(reuseport: bool) -> None:
    """The server closed its connections first (as at shutdown): they wait in TIME_WAIT on
    the port for a minute, which a bind without SO_REUSEADDR would take for a server."""
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, int(reuseport))
    server.bind(("127.0.0.1", port))
    server.listen()
    client = socket.create_connection(("127.0.0.1", port))
    server.accept()[0].close()
    time.sleep(0.05)
    client.close()
    server.close()
    for workers in (1, 2):
        held = supervision.hold_grpc_port(Settings(grpc_port=port, workers=workers))
        if held is not None:
            held.close()


def test_the_host_must_be_one_of_this_machines() -> None:
    settings = Settings(host="192.0.2.1", grpc_port=free_port())  # TEST-NET-1
    with pytest.raises(SettingsError, match=r"cannot listen on 192\.0\.2\.1:"):
        supervision.hold_grpc_port(settings)


def test_a_process_of_its_own_has_no_supervisor_to_watch() -> None:
    asyncio.run(asyncio.wait_for(supervision.stop_when_orphaned(interval=0.01), 1))


@pytest.fixture
def temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path`` as the temporary directory, and no metrics directory named."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name in ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def holding(path: Path) -> int:
    """A descriptor holding a shared lock on ``path``, as a live instance's process does
    (each open of a directory is a lock of its own, in one process as in several)."""
    held = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_SH)
    return held


def test_a_start_removes_the_metrics_directories_no_process_holds(
    temporary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Those of instances killed whole; never one a live process holds, one an older
    release made (no lock says whether it is in use), or anything not named as they are."""
    left = temporary / "pe-metrics-4242-abcd1234"
    left.mkdir()
    (left / "counter_4243.db").write_bytes(b"\0" * 64)
    live = temporary / "pe-metrics-77-xyz_0123"
    live.mkdir()
    older = temporary / "pe-metrics-k2j4h5g6"
    older.mkdir()
    named = temporary / "pe-metrics-78-named"
    named.mkdir()
    (temporary / "pe-metrics-79-file").write_bytes(b"")
    held = holding(live)
    try:
        with monkeypatch.context() as patched:
            patched.setenv("PROMETHEUS_MULTIPROC_DIR", str(named))  # whoever named it keeps it
            assert supervision.sweep(str(temporary)) == [str(left)]
    finally:
        os.close(held)
    assert sorted(p.name for p in temporary.iterdir()) == [
        "pe-metrics-77-xyz_0123",
        "pe-metrics-78-named",
        "pe-metrics-79-file",
        "pe-metrics-k2j4h5g6",
    ]
    assert sorted(supervision.sweep(str(temporary))) == [str(live), str(named)]


def test_the_supervisor_holds_its_metrics_directory_until_its_workers_stop(
    temporary: Path,
) -> None:
    earlier = temporary / "pe-metrics-4242-abcd1234"
    earlier.mkdir()
    with supervision.metrics_directory(2):
        path = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
        assert path.parent == temporary
        assert path.name.startswith(f"pe-metrics-{os.getpid()}-")
        assert not earlier.exists()  # swept first
        assert supervision.sweep(str(temporary)) == []  # another start leaves it
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    assert not any(temporary.iterdir())
    earlier.mkdir()
    with supervision.metrics_directory(1):  # one process: no directory, but the sweep
        assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
        assert not any(temporary.iterdir())


@pytest.fixture
def made(temporary: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A metrics directory as the supervisor makes it, held by no one (its supervisor
    killed), named for the workers."""
    path = temporary / "pe-metrics-4242-abcd1234"
    path.mkdir()
    (path / "counter_4243.db").write_bytes(b"\0" * 64)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(path))
    return path


def test_the_last_worker_of_a_killed_supervisor_removes_its_directory(made: Path) -> None:
    with supervision._sharing(str(made)):
        with supervision._sharing(str(made)):
            assert supervision.sweep(str(made.parent)) == []  # a start leaves it
        assert made.exists()  # the other worker still runs
    assert not made.exists()


def test_a_worker_leaves_the_directory_its_supervisor_holds(made: Path) -> None:
    supervisor = holding(made)
    try:
        with supervision._sharing(str(made)):
            pass
        assert made.exists()
    finally:
        os.close(supervisor)


def test_a_worker_leaves_a_directory_it_did_not_make(tmp_path: Path, made: Path) -> None:
    """Named by whoever runs the service, or elsewhere than the temporary directory."""
    for path in (tmp_path / "metrics", tmp_path / "elsewhere" / made.name):
        path.mkdir(parents=True)
        with supervision._sharing(str(path)):
            pass
        assert path.exists()
