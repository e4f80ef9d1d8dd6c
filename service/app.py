"""The application factory: ``create_app(settings)``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Final

from fastapi import Depends, FastAPI
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from service import __version__, preload
from service.encodings import kernels
from service.inference.models import Repository
from service.inference.serving import grpc_serving
from service.metrics import Telemetry
from service.middleware.cors import Cors, blanket_headers
from service.middleware.direct import Direct
from service.middleware.head import HeadAsGet
from service.middleware.replay import Replay
from service.middleware.telemetry import TelemetryMiddleware
from service.routes import FAMILIES, ROUTERS, inference
from service.runtime import Runtime
from service.server import supervision
from service.server.edge import Edge
from service.server.pacing import BUFFERED_BYTES
from service.settings import Settings, from_environment
from service.web import compare, examples, openapi, problems, verify
from service.web.declared import Declared
from service.web.deps import single_valued
from service.web.families import readers, router

_DESCRIPTION: Final = (
    "Tables of every family: **sinusoidal** (the paper's, and eleven libraries' presets, "
    "`GET /v1/presets`), **rotary** (RoPE: cos and sin with Hugging Face's scalings, or "
    "from a model's `config.json`) and **ALiBi** (slopes and biases), in JSON, `.npy`, "
    "`.npz`, safetensors or raw bytes, with strong ETags; the encodings applied to posted "
    "batches; pictures; the Open Inference Protocol (`/v2`). "
    "Every `GET` operation answers `HEAD` too: the same status and headers, no body. "
    "Pages of other origins may read the answers (CORS), as `PE_CORS_ORIGINS` allows."
)


class ServiceApp(FastAPI):
    """FastAPI behind the service's own middleware stack (``outer_middleware_stack``), from
    the outside in (:mod:`service.middleware`): telemetry, which counts and logs every
    answer once; CORS, which gives every answer its headers however it is made; replay,
    which answers a repeated immutable request before any of the framework's middleware,
    routing or validation runs; and ``HEAD`` as ``GET``.

    Outside FastAPI's own ``middleware_stack``, not in it: a replayed answer passes no
    code of the framework's (its ``__call__`` looks at its telemetry on every request).
    And the stack's replayed answers are made by the protocol itself, without ASGI, by the
    same layers' functions (``edge.direct``: :mod:`service.middleware.direct`)."""

    def __init__(self, edge: Edge, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.outer_middleware_stack: ASGIApp = self.framework
        self.edge = edge  # what the protocol and the pacing take from the app

    async def framework(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.outer_middleware_stack(scope, receive, send)

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document, each posted body with an example that works as it stands,
        and the refusals the server's protocol may give any operation."""
        return openapi.with_protocol_refusals(examples.with_examples(super().openapi()))


def create_app(
    settings: Settings | None = None, families: Sequence[Declared[Any, Any]] = ()
) -> FastAPI:
    """The service, configured by ``settings`` (by default, from the environment), with
    ``families`` served beside :data:`service.routes.FAMILIES` (a test's).

    Raises ``ValueError`` for a ``PE_PRELOAD`` that is malformed or over the limits.
    """
    settings = from_environment() if settings is None else settings
    kernels.use(settings.library_engine)
    served = [*FAMILIES, *families]
    # the families known to the registry; compare last, as it always was, for all of them
    # the Open Inference Protocol's models: one per family served, and the apply models
    repository = Repository.of(served)
    routers = [
        *ROUTERS,
        *map(router, families),
        compare.router(served),
        verify.router(served),
        inference.router(repository),
    ]
    tables = preload.checked(settings, readers(served))

    # the running runtime, as replay reads it on every request: app.state's attribute
    # lookup cost more than the rest of a replayed answer's lookup
    running: list[Runtime] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = app.state.runtime = Runtime(settings, telemetry)
        running[:] = [runtime]
        loading = asyncio.create_task(preload.run(tables, runtime))
        publishing = asyncio.create_task(telemetry.publishing())
        # a worker whose supervisor is killed would go on serving the ports for ever
        watching = asyncio.create_task(supervision.stop_when_orphaned())
        try:
            async with grpc_serving(runtime, repository):
                yield
        finally:
            loading.cancel()
            publishing.cancel()
            watching.cancel()

    origins = settings.allowed_origins()
    app = ServiceApp(
        Edge.of(settings, blanket_headers(origins)),
        title="Positional encodings",
        version=__version__,
        summary="Positional encodings of transformer models (sinusoidal, RoPE, ALiBi), "
        "computed, cached and served.",
        description=_DESCRIPTION,
        lifespan=lifespan,
        dependencies=[Depends(single_valued)],
        # served by service.routes.docs, with their assets, instead of from a CDN
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    telemetry = Telemetry(lambda: runtime.cache if (runtime := _runtime(app)) else None)
    problems.install(app)
    for each in routers:
        app.include_router(each)
    replay = Replay(
        HeadAsGet(app.outer_middleware_stack), cache=lambda: running[0].cache if running else None
    )
    app.outer_middleware_stack = replay
    cors = None if origins == frozenset() else Cors(replay, origins)
    if cors is not None:
        app.outer_middleware_stack = cors
    # outermost: every answer, replayed or a preflight too, passes it once (no call-backs);
    # a request no route took is labelled by the route its path names, if any
    # the routers' routes and the app's own (/openapi.json), each once, as they are now
    candidates = [*app.router.routes, *(route for each in routers for route in each.routes)]
    routes = list({id(r): r for r in candidates if isinstance(r, Route)}.values())
    app.outer_middleware_stack = outermost = TelemetryMiddleware(
        app.outer_middleware_stack,
        telemetry,
        json_logs=settings.log_format == "json",
        routes=routes,
    )
    # the stack's replayed answers, for the protocol to make without ASGI
    app.edge = replace(app.edge, direct=Direct(replay, cors, outermost, BUFFERED_BYTES))
    return app


def _runtime(app: FastAPI) -> Runtime | None:
    return getattr(app.state, "runtime", None)
