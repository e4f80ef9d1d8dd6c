"""The application factory: ``create_app(settings)``."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from service import problems, routes, views
from service.cache import TableCache, TableKey
from service.hot import HotResponses
from service.settings import Settings
from service.telemetry import Telemetry, TelemetryMiddleware

logger = logging.getLogger("service")


async def _preload(app: FastAPI, settings: Settings) -> None:
    cache: TableCache = app.state.cache
    try:
        for table in settings.preload_tables:
            key = TableKey(table.d_model, table.base, table.layout, table.dtype)
            await anyio.to_thread.run_sync(cache.get, key, table.max_len, limiter=app.state.limiter)
            logger.info("preloaded %s with %d rows", key, table.max_len)
    except Exception as exc:  # the process stays up and /readyz reports it
        logger.exception("preloading failed")
        app.state.preload_error = repr(exc)
    else:
        app.state.ready = True


class ServiceApp(FastAPI):
    """FastAPI behind the service's own outermost layers (``front``): hot responses, which
    answer a repeated table request before any of the framework's middleware, routing or
    validation runs, then telemetry."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.front: ASGIApp = self.framework

    async def framework(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.front(scope, receive, send)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service, configured by ``settings`` (by default, from the environment)."""
    settings = Settings() if settings is None else settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.cache = TableCache(settings.cache_bytes)
        app.state.limiter = anyio.CapacityLimiter(os.cpu_count() or 1)
        app.state.large_answers = anyio.Semaphore(os.cpu_count() or 1)
        app.state.painter = anyio.CapacityLimiter(1)  # matplotlib draws one picture at a time
        app.state.ready = False
        app.state.preload_error = None
        preload = asyncio.create_task(_preload(app, settings))
        try:
            yield
        finally:
            preload.cancel()

    app = ServiceApp(
        title="Positional encodings",
        version="1.0.0",
        summary="Sinusoidal positional encodings of transformer models, computed and served.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.telemetry = telemetry = Telemetry(lambda: getattr(app.state, "cache", None))
    observed = TelemetryMiddleware(app.front, telemetry, json_logs=settings.log_format == "json")
    app.front = HotResponses(observed, cache=lambda: app.state.cache, record=observed.record)
    problems.install(app)
    app.include_router(routes.router)
    app.include_router(views.router)
    return app
