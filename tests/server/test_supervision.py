"""The gRPC port held by the supervisor against another instance, on real sockets: the
probe, the socket kept, and what the workers' own sockets (as gRPC binds them) may do
beside it. The workers' stop when their supervisor dies is tests/system/test_processes."""

from __future__ import annotations

import asyncio
import socket
import time

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
