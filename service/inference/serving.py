"""Whether the app serves the Open Inference Protocol over gRPC too: with ``PE_GRPC_PORT``
set, :mod:`service.inference.grpc`'s server runs while the app does. gRPC is an optional
extra, imported here only when it is asked for, so the service runs without it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from service.inference.models import Repository
from service.runtime import Runtime


class GrpcUnavailable(RuntimeError):
    """``PE_GRPC_PORT`` is set, but the grpc extra is not installed."""


@contextlib.asynccontextmanager
async def grpc_serving(runtime: Runtime, repository: Repository) -> AsyncIterator[None]:
    """The gRPC server of ``repository``'s models while the context lasts, if
    ``PE_GRPC_PORT`` is set; else nothing.

    Entered as the app starts (in each worker), so that a failure stops the start-up:
    :class:`GrpcUnavailable` without the grpc extra, or ``CannotListen``."""
    if not runtime.settings.grpc_port:
        yield
        return
    try:
        from service.inference import grpc
    except ImportError as exc:
        raise GrpcUnavailable(
            f"PE_GRPC_PORT is set, but the grpc extra is not installed ({exc}): install the "
            "service with it (pip install '.[grpc]'), or unset PE_GRPC_PORT"
        ) from None
    async with grpc.serving(runtime, repository):
        yield
