"""Operations: cache statistics, Prometheus metrics, liveness and readiness."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.encodings.registry import family_of
from service.schemas.common import CacheDocument, CacheTable, Status
from service.web import openapi
from service.web.deps import RuntimeDep
from service.web.problems import problem

router = APIRouter(tags=["operations"])


@router.get(
    "/v1/cache",
    operation_id="getCacheStats",
    summary="Cache statistics: tables held, bytes, budget, hits, misses, evictions.",
)
async def get_cache_stats(runtime: RuntimeDep, response: Response) -> CacheDocument:
    """Cache statistics: tables held, bytes, budget, hits, misses, evictions."""
    stats = await runtime.compute(0, runtime.cache.stats)  # thousands of tables: off the loop
    response.headers["cache-control"] = "no-store"
    return CacheDocument(
        budget_bytes=stats.budget_bytes,
        bytes=stats.bytes,
        hits=stats.hits,
        misses=stats.misses,
        evictions=stats.evictions,
        uncached=stats.uncached,
        tables_total=stats.tables_total,
        responses=stats.responses,
        response_bytes=stats.response_bytes,
        response_hits=stats.response_hits,
        worker=os.getpid(),
        workers=runtime.settings.workers,
        tables=[
            CacheTable(
                family=family_of(table.key).name,
                key=_fields(table.key),
                pages=table.pages,
                page_rows=runtime.cache.page_rows(table.key),
                bytes=table.bytes,
            )
            for table in stats.tables
        ],
    )


def _fields(key: Any) -> dict[str, Any]:
    """A key's fields by name; its ``params`` (name, value) pairs among them."""
    fields = dataclasses.asdict(key)
    fields.update(dict(fields.pop("params", ())))
    return fields


@router.get(
    "/metrics",
    operation_id="getMetrics",
    summary="Prometheus metrics: requests by route and status, latency, the cache.",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
)
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics: requests by route and status, latency, the cache."""
    # several workers: every worker's files are read, and this one's cache counted
    body = await runtime.compute(0, generate_latest, runtime.telemetry.registry)
    return Response(body, headers={"content-type": CONTENT_TYPE_LATEST})


@router.get("/healthz", operation_id="getHealth", summary="Liveness: the process answers.")
async def healthz() -> Status:
    """Liveness: the process answers."""
    return Status(status="ok")


@router.get(
    "/readyz",
    operation_id="getReadiness",
    summary="Readiness: 200 once the PE_PRELOAD tables are computed, 503 before.",
    responses=openapi.problems_of(503),
)
async def readyz(runtime: RuntimeDep) -> Any:
    """Readiness: 200 once the PE_PRELOAD tables are computed, 503 before."""
    if runtime.preload_error is not None:
        return problem(503, f"preloading tables failed: {runtime.preload_error}")
    if not runtime.ready:
        return problem(503, "still preloading the PE_PRELOAD tables", headers={"retry-after": "1"})
    return Status(status="ready")
