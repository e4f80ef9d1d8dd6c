"""The service under uvicorn's supervisor (``PE_WORKERS`` over 1): a worker stops when its
supervisor is gone, the gRPC port the workers share is the instance's alone, and the
directory where they keep their metrics goes with the last of them, however they stop.

uvicorn's supervisor binds the HTTP port once and hands it to its workers, but each worker
binds ``PE_GRPC_PORT`` itself, with ``SO_REUSEPORT`` so that they can share it: left at
that, the port is shared with any other process of the same user that asks the same way
(another instance of the service), which would take part of the calls unseen.

The metrics directory (``pe-metrics-PID-RANDOM`` in the temporary directory, for
prometheus-client's multiprocess mode) is held by every process of its instance with a
shared ``flock``, which the kernel drops as each one ends, killed or not: the supervisor
removes it once its workers have stopped; the last worker to stop removes it when the
supervisor has gone first (SIGKILL); and a start removes every one that no process holds,
such as those of an instance killed whole. A lock, unlike a recorded process id, is never
taken for another process's (a reused id, another container's)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import multiprocessing
import os
import re
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from typing import Final

from service.settings import Settings, SettingsError

# how often a worker looks for its supervisor: it stops within this much of its going
WATCH_SECONDS: Final = 0.5
# the metrics directories python -m service makes (its own; an older release's, named
# pe-metrics-RANDOM and held by no lock, are never taken for one)
_METRICS_PREFIX: Final = "pe-metrics-"
_MADE: Final = re.compile(re.escape(_METRICS_PREFIX) + r"\d+-\w+")
logger = logging.getLogger("service")


async def stop_when_orphaned(interval: float = WATCH_SECONDS) -> None:
    """In a worker of uvicorn's supervisor: once the supervisor has gone (SIGKILL, a
    crash), SIGTERM to this worker, which uvicorn takes as its graceful shutdown, so that
    no worker goes on holding the ports with nothing to restart or stop it. Meanwhile, and
    until it is cancelled (the app's shutdown), this worker's share of the metrics
    directory (:func:`metrics_directory`). Returns at once in a process that is no
    supervisor's worker (one alone, a test's app)."""
    # uvicorn starts its workers with multiprocessing (spawn); the supervisor's pid comes
    # from there rather than from getppid() at start-up, so a supervisor that is already
    # gone by the time this runs is seen too
    supervisor = multiprocessing.parent_process()
    if supervisor is None:
        return
    with _sharing(os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")):
        # a process whose parent dies is given to another (init or a subreaper) at once
        while os.getppid() == supervisor.pid:
            await asyncio.sleep(interval)
        logger.warning("the supervisor [%s] is gone: this worker stops", supervisor.pid)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.Event().wait()  # the directory held until the shutdown is over


@contextlib.contextmanager
def metrics_directory(workers: int) -> Iterator[None]:
    """In the supervisor, around ``uvicorn.run``: with several workers, an empty directory
    for their metrics (:mod:`service.metrics`), named in ``PROMETHEUS_MULTIPROC_DIR`` for
    the workers to inherit, held (see the module's docstring), and removed when they have
    stopped; one that is already named (checked empty) is used, and left, as it is. First,
    in any case, the directories of earlier instances that no process holds are removed."""
    from service.metrics import DIRECTORY_VARIABLES  # prometheus-client, not for --help

    sweep(tempfile.gettempdir())
    if workers == 1 or any(name in os.environ for name in DIRECTORY_VARIABLES):
        yield
        return
    while True:
        path = tempfile.mkdtemp(prefix=f"{_METRICS_PREFIX}{os.getpid()}-")
        held = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        # another start's sweep may have found it before this lock: it waits until that
        # one has removed it, then makes another
        fcntl.flock(held, fcntl.LOCK_SH)
        if os.fstat(held).st_nlink:
            break
        os.close(held)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    try:
        yield
    finally:
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
        shutil.rmtree(path, ignore_errors=True)
        os.close(held)


def sweep(directory: str) -> list[str]:
    """The metrics directories in ``directory`` that no process holds, removed (their
    paths): those of instances killed whole, or whose last worker was. One that
    ``PROMETHEUS_MULTIPROC_DIR`` names is left to whoever named it."""
    from service.metrics import DIRECTORY_VARIABLES

    named = {os.environ.get(name) for name in DIRECTORY_VARIABLES}
    removed: list[str] = []
    try:
        with os.scandir(directory) as entries:
            candidates = [each.path for each in entries if _MADE.fullmatch(each.name)]
    except OSError:
        return removed
    for path in candidates:
        try:
            held = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone meanwhile, or not a directory
        if path not in named and _removed_if_unheld(path, held):
            removed.append(path)
    return removed


@contextlib.contextmanager
def _sharing(path: str) -> Iterator[None]:
    """A worker's share of the metrics directory ``path`` (one that python -m service
    made), and on leaving, the directory removed if no other process holds it any more:
    its supervisor has gone, and this is the last of its workers."""
    held = _shared(path)
    try:
        yield
    finally:
        if held is not None:
            _removed_if_unheld(path, held)


def _shared(path: str) -> int | None:
    """A descriptor of ``path`` with a shared lock on it, if python -m service made it and
    no start is removing it."""
    made = _MADE.fullmatch(os.path.basename(path))
    if not made or os.path.dirname(path) != tempfile.gettempdir():
        return None
    try:
        held = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        fcntl.flock(held, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(held)
        return None
    return held


def _removed_if_unheld(path: str, held: int) -> bool:
    """``path`` removed if the lock on ``held`` (its descriptor, closed here) can be made
    exclusive: no other process holds it."""
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held (or a file system without locks: left, to be safe)
    else:
        shutil.rmtree(path, ignore_errors=True)
        return True
    finally:
        os.close(held)


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
