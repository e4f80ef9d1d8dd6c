"""The application factory: ``create_app(settings)``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from service import __version__, preload
from service.limits import Limits
from service.replay import Replay
from service.routes import ROUTERS
from service.runtime import Runtime
from service.settings import Settings
from service.telemetry import Telemetry, TelemetryMiddleware
from service.web import problems
from service.web.deps import single_valued


class ServiceApp(FastAPI):
    """FastAPI behind the service's own outermost layers (``front``): replay, which answers
    a repeated immutable request before any of the framework's middleware, routing or
    validation runs, then telemetry."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.front: ASGIApp = self.framework

    async def framework(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.front(scope, receive, send)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service, configured by ``settings`` (by default, from the environment).

    Raises ``ValueError`` for a ``PE_PRELOAD`` that is malformed or over the limits.
    """
    settings = Settings() if settings is None else settings
    tables = preload.parse(settings.preload)
    preload.check(tables, Limits.of(settings))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = app.state.runtime = Runtime(settings, telemetry)
        loading = asyncio.create_task(preload.run(tables, runtime))
        try:
            yield
        finally:
            loading.cancel()

    app = ServiceApp(
        title="Positional encodings",
        version=__version__,
        summary="Sinusoidal positional encodings of transformer models, computed and served.",
        lifespan=lifespan,
        dependencies=[Depends(single_valued)],
    )
    telemetry = Telemetry(lambda: runtime.cache if (runtime := _runtime(app)) else None)
    observed = TelemetryMiddleware(app.front, telemetry, json_logs=settings.log_format == "json")
    app.front = Replay(observed, cache=lambda: app.state.runtime.cache, record=observed.record)
    problems.install(app)
    for router in ROUTERS:
        app.include_router(router)
    return app


def _runtime(app: FastAPI) -> Runtime | None:
    return getattr(app.state, "runtime", None)
