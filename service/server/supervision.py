"""The service under uvicorn's supervisor (``PE_WORKERS`` over 1): a worker stops when its
supervisor is gone, and the gRPC port the workers share is the instance's alone.

uvicorn's supervisor binds the HTTP port once and hands it to its workers, but each worker
binds ``PE_GRPC_PORT`` itself, with ``SO_REUSEPORT`` so that they can share it: left at
that, the port is shared with any other process of the same user that asks the same way
(another instance of the service), which would take part of the calls unseen."""

from __future__ import annotations

import asyncio
import errno
import logging
import multiprocessing
import os
import signal
import socket
from typing import Final

from service.settings import Settings, SettingsError

# how often a worker looks for its supervisor: it stops within this much of its going
WATCH_SECONDS: Final = 0.5
logger = logging.getLogger("service")


async def stop_when_orphaned(interval: float = WATCH_SECONDS) -> None:
    """In a worker of uvicorn's supervisor: once the supervisor has gone (SIGKILL, a
    crash), SIGTERM to this worker, which uvicorn takes as its graceful shutdown, so that
    no worker goes on holding the ports with nothing to restart or stop it. Returns at once
    in a process that is no supervisor's worker (one alone, a test's app)."""
    # uvicorn starts its workers with multiprocessing (spawn); the supervisor's pid comes
    # from there rather than from getppid() at start-up, so a supervisor that is already
    # gone by the time this runs is seen too
    supervisor = multiprocessing.parent_process()
    if supervisor is None:
        return
    # a process whose parent dies is given to another (init or a subreaper) at once
    while os.getppid() == supervisor.pid:
        await asyncio.sleep(interval)
    logger.warning("the supervisor [%s] is gone: this worker stops", supervisor.pid)
    os.kill(os.getpid(), signal.SIGTERM)


def hold_grpc_port(settings: Settings) -> socket.socket | None:
    """With ``PE_GRPC_PORT`` set, in the supervisor (or the one process) before anything
    is served: a :class:`SettingsError` if another process holds the port, and, with
    several workers, a socket to keep open until they have stopped, that holds the port
    against another instance while letting this one's workers bind it.

    The probe binds without ``SO_REUSEPORT``, so any socket on the port stops it, sharing
    or not; it has ``SO_REUSEADDR`` so that the connections of an earlier run in
    TIME_WAIT do not. The socket kept is bound with ``SO_REUSEPORT`` and never listens:
    the workers (``SO_REUSEPORT``, same user) join it and the kernel spreads the
    connections over their listening sockets only; a later instance's probe fails on it
    even while no worker listens (starting, or all of them being replaced)."""
    if not settings.grpc_port:
        return None
    host = settings.host.removeprefix("[").removesuffix("]")
    # the family as uvicorn chooses it for PE_HOST and PE_PORT
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    where = (host, settings.grpc_port)
    shown = (
        f"[{host}]:{settings.grpc_port}"
        if family == socket.AF_INET6
        else f"{host}:{settings.grpc_port}"
    )
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(where)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise SettingsError(
                    f"PE_GRPC_PORT={settings.grpc_port}: {shown} is in use (another "
                    "instance of the service, or another server): stop it, or give "
                    "another port"
                ) from None
            raise SettingsError(
                f"PE_GRPC_PORT={settings.grpc_port}: cannot listen on {shown}: "
                f"{exc.strerror or exc}"
            ) from None
    if settings.workers == 1:
        # the one process binds it alone (no SO_REUSEPORT), which holds it well enough
        return None
    keeper = socket.socket(family, socket.SOCK_STREAM)
    keeper.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        keeper.bind(where)
    except OSError:
        # the connections of an earlier run in TIME_WAIT, from a socket without
        # SO_REUSEPORT (one process alone), refuse this one (without SO_REUSEADDR, or it
        # would not stop a probe) for a minute: then the workers' listening sockets alone
        # hold the port, which stops a later probe too once they listen
        keeper.close()
        return None
    return keeper
