"""HTTP handlers: parse, call the cache and the codecs, answer. Nothing else."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

import anyio
import numpy as np
from fastapi import APIRouter, Depends, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.types import Receive, Scope, Send

from service import batches, codecs
from service.cache import Table, TableCache, TableKey
from service.errors import BodyTooLarge, LimitExceeded, MalformedBody, UnsupportedMediaType
from service.problems import PROBLEM_MEDIA_TYPE, problem
from service.schemas import (
    ApplyBody,
    ApplyDocument,
    ApplyQuery,
    BlockQuery,
    CacheDocument,
    CacheEntry,
    Problem,
    RowsQuery,
    Status,
    TableDocument,
    TableQuery,
)
from service.settings import Settings

TABLE_PATH = "/v1/encodings/sinusoidal"
# Bump when the bytes of any table response change for the same parameters.
TABLE_REVISION = "1"
IMMUTABLE = "public, max-age=31536000, immutable"
# Encoding a block this large would hold up the event loop for a noticeable time.
_INLINE_JSON_ELEMENTS = 1 << 12
_INLINE_BINARY_BYTES = 4 << 20
# Smaller JSON tables are not worth compressing.
_GZIP_MIN_ELEMENTS = 64
# A request whose table is larger than this holds one of a few permits (one per core) from
# its computation until its answer is sent, so a burst of large tables takes turns instead
# of holding every table and every answer in memory at once.
_LARGE_TABLE_BYTES = 8 << 20
_SEND_CHUNK_BYTES = 1 << 20


class PermitResponse(Response):
    """An answer that gives its permit back once it has been sent, or has failed. Its body
    goes out in 1 MiB chunks, each within ``send_timeout`` seconds: a client that stops
    reading is cut off instead of keeping the permit."""

    def __init__(
        self,
        content: bytes,
        headers: dict[str, str],
        release: Callable[[], None],
        send_timeout: float,
    ) -> None:
        super().__init__(content, headers=headers)
        self._release = release
        self._send_timeout = send_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            start = {"type": "http.response.start", "status": self.status_code}
            await send({**start, "headers": self.raw_headers})
            body = memoryview(self.body)
            for offset in range(0, max(len(body), 1), _SEND_CHUNK_BYTES):
                chunk = body[offset : offset + _SEND_CHUNK_BYTES]
                more = offset + _SEND_CHUNK_BYTES < len(body)
                with anyio.fail_after(self._send_timeout):
                    await send({"type": "http.response.body", "body": chunk, "more_body": more})
        finally:
            self._release()


# async: a plain def dependency would cost every request a hop to the thread pool
async def get_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


async def get_cache(request: Request) -> TableCache:
    return request.app.state.cache  # type: ignore[no-any-return]


T = TypeVar("T")


async def offload(request: Request, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run CPU-bound work in a worker thread, at most one per core at a time: more would
    only fight over the GIL and hold more memory at once."""
    limiter: anyio.CapacityLimiter = request.app.state.limiter
    return await anyio.to_thread.run_sync(functools.partial(work, *args, **kwargs), limiter=limiter)


SettingsDep = Annotated[Settings, Depends(get_settings)]
CacheDep = Annotated[TableCache, Depends(get_cache)]

_PROBLEM_CAUSES = {
    400: "The body is not readable as its media type.",
    406: "No offered format is acceptable.",
    413: "The body is over PE_MAX_BODY_BYTES.",
    415: "The body's media type is not one the endpoint reads.",
    422: "A parameter is invalid or a limit is exceeded.",
    501: "This installation cannot draw pictures: it lacks the plots extra (matplotlib).",
}


def problems_of(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem responses an operation can give."""
    return {
        status: {
            "model": Problem,
            "content": {PROBLEM_MEDIA_TYPE: {}},
            "description": _PROBLEM_CAUSES[status],
        }
        for status in statuses
    }


_binary = {"schema": {"type": "string", "format": "binary"}}
_table_media: dict[str, Any] = {
    "application/json": {},
    **{codecs.MEDIA_TYPES[fmt]: _binary for fmt in codecs.TABLE_FORMATS if fmt != "json"},
}

_apply_media: dict[str, Any] = {
    "application/json": {},
    **{codecs.MEDIA_TYPES[fmt]: _binary for fmt in ("npy", "npz", "raw")},
}
_apply_body: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {"schema": ApplyBody.model_json_schema()},
        codecs.MEDIA_TYPES["npy"]: _binary,
        codecs.MEDIA_TYPES["npz"]: _binary,
    },
}
_table_headers = {
    name: {"description": text, "schema": {"type": "string"}}
    for name, text in {
        "ETag": "Strong validator; send it back in If-None-Match for a 304.",
        "Cache-Control": "public, max-age=31536000, immutable: tables never change.",
        "X-Shape": "raw only: rows,cols of the block.",
        "X-Dtype": "raw only: float32, float64 or float16.",
    }.items()
}
_BODY_TYPES = {codecs.MEDIA_TYPES[fmt]: fmt for fmt in codecs.BODY_FORMATS}

router = APIRouter()


def strong_etag(content: bytes) -> str:
    """A strong validator for ``content``: what it is, or what it is a pure function of."""
    return '"' + hashlib.sha256(content).hexdigest()[:32] + '"'


def fields_etag(*parts: str, fields: dict[str, Any]) -> str:
    """:func:`strong_etag` of ``parts`` and ``fields``, in a canonical order."""
    canonical = "|".join([*parts, *(f"{name}={fields[name]!r}" for name in sorted(fields))])
    return strong_etag(canonical.encode())


def table_etag(query: TableQuery, fmt: codecs.Format, gzip: bool) -> str:
    """A strong validator: the response bytes are a pure function of these values."""
    encoding = "gzip" if gzip else "identity"
    return fields_etag(TABLE_REVISION, fmt, encoding, fields=query.describe())


def matches(if_none_match: str | None, etag: str) -> bool:
    """Weak comparison of ``If-None-Match`` against ``etag`` (RFC 9110, 13.1.2)."""
    if if_none_match is None:
        return False
    candidates = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in candidates or etag in candidates


def check_table_size(query: RowsQuery, settings: Settings) -> None:
    """422 for a table over ``PE_MAX_ELEMENTS``, before anything is allocated."""
    elements = query.max_len * query.d_model
    if elements > settings.max_elements:
        raise LimitExceeded("max_len × d_model", elements, settings.max_elements, "PE_MAX_ELEMENTS")


def check_limits(query: TableQuery, fmt: codecs.Format, settings: Settings) -> None:
    check_table_size(query, settings)
    rows, cols = query.shape
    if fmt == "json" and rows * cols > settings.max_json_elements:
        raise LimitExceeded(
            "the JSON response's element count (rows × columns)",
            rows * cols,
            settings.max_json_elements,
            "PE_MAX_JSON_ELEMENTS; ask for format=npy or raw, or a slice",
        )


@router.get(
    TABLE_PATH,
    operation_id="getSinusoidalTable",
    summary="A sinusoidal positional-encoding table, or a block of it.",
    response_class=Response,
    responses={
        200: {
            "model": TableDocument,
            "content": _table_media,
            "description": "The table.",
            "headers": _table_headers,
        },
        304: {"description": "Not modified: the If-None-Match tag is current."},
        **problems_of(406, 422),
    },
)
async def get_table(
    query: Annotated[TableQuery, Query()],
    request: Request,
    cache: CacheDep,
    settings: SettingsDep,
) -> Response:
    """A sinusoidal positional-encoding table, or a block of it."""
    fmt = query.format or codecs.negotiate(request.headers.get("accept"))
    check_limits(query, fmt, settings)
    rows, cols = query.shape
    gzip = (
        fmt == "json"
        and rows * cols >= _GZIP_MIN_ELEMENTS
        and codecs.accepts_gzip(request.headers.get("accept-encoding"))
    )
    headers = {"etag": table_etag(query, fmt, gzip), "cache-control": IMMUTABLE}
    vary = [
        name
        for name, varies in [("Accept", query.format is None), ("Accept-Encoding", fmt == "json")]
        if varies
    ]
    if vary:
        headers["vary"] = ", ".join(vary)
    if matches(request.headers.get("if-none-match"), headers["etag"]):
        return Response(status_code=304, headers=headers)
    if not is_large(query):
        encoded, body = await _answer(request, query, fmt, gzip, cache)
        return Response(body, headers={**headers, **encoded})
    permits: anyio.Semaphore = request.app.state.large_answers
    await permits.acquire()
    try:
        encoded, body = await _answer(request, query, fmt, gzip, cache)
    except BaseException:
        permits.release()
        raise
    return PermitResponse(body, {**headers, **encoded}, permits.release, settings.send_timeout)


def is_large(query: BlockQuery) -> bool:
    """Whether the table ``query`` needs is over 8 MiB, and so takes a permit."""
    return query.row_stop * query.d_model * np.dtype(query.dtype).itemsize > _LARGE_TABLE_BYTES


async def table_rows(request: Request, query: BlockQuery, cache: TableCache) -> Table:
    """The table ``query`` names with at least its ``row_stop`` rows: from the cache, or
    computed in a worker thread."""
    key = TableKey(query.d_model, query.base, query.layout, query.dtype)
    table = cache.peek(key, query.row_stop)
    if table is None:
        table = await offload(request, cache.get, key, query.row_stop)
    return table


@asynccontextmanager
async def large_table_turn(request: Request, query: BlockQuery) -> AsyncIterator[None]:
    """For a table over 8 MiB, hold one of the few permits (see ``PermitResponse``)."""
    if not is_large(query):
        yield
        return
    permits: anyio.Semaphore = request.app.state.large_answers
    async with permits:
        yield


async def _answer(
    request: Request, query: TableQuery, fmt: codecs.Format, gzip: bool, cache: TableCache
) -> tuple[codecs.Headers, bytes]:
    """The encoded block the query asks for: from the cache, computing what it lacks."""
    table = await table_rows(request, query, cache)
    block = table[query.start : query.row_stop, query.dim_start : query.col_stop]
    inline = (
        block.size <= _INLINE_JSON_ELEMENTS
        if fmt == "json"
        else block.nbytes <= _INLINE_BINARY_BYTES
    )
    encode = batches.encode_block
    if inline:
        return encode(fmt, query.describe(), block, gzip=gzip)
    return await offload(request, encode, fmt, query.describe(), block, gzip=gzip)


def body_format(content_type: str | None) -> codecs.BodyFormat:
    """The body format a ``Content-Type`` names; 415 for any other."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media not in _BODY_TYPES:
        raise UnsupportedMediaType(content_type, list(_BODY_TYPES))
    return _BODY_TYPES[media]


async def read_body(request: Request, limit: int) -> bytearray:
    """The request body, refused with 413 as soon as it is known to pass ``limit``: from
    ``Content-Length`` before reading, or while reading a chunked body."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge("the request body", int(declared), limit, "PE_MAX_BODY_BYTES")
    if declared.isdigit():  # one buffer of the right size: no copies while reading
        body = bytearray(int(declared))
        filled = 0
        with memoryview(body) as view:
            async for chunk in request.stream():
                if filled + len(chunk) > len(body):
                    raise MalformedBody("the body is longer than its Content-Length")
                view[filled : filled + len(chunk)] = chunk
                filled += len(chunk)
        return body if filled == len(body) else body[:filled]
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge("the request body (at least)", len(body), limit, "PE_MAX_BODY_BYTES")
    return body


@router.post(
    "/v1/encodings/sinusoidal/apply",
    operation_id="applySinusoidal",
    summary="X * scale + PE[positions] for a posted embedding batch.",
    response_class=Response,
    openapi_extra={"requestBody": _apply_body},
    responses={
        200: {"model": ApplyDocument, "content": _apply_media, "description": "The result."},
        **problems_of(400, 406, 413, 415, 422),
    },
)
async def apply(
    query: Annotated[ApplyQuery, Query()],
    request: Request,
    cache: CacheDep,
    settings: SettingsDep,
) -> Response:
    """X * scale + PE[positions] for a posted embedding batch."""
    kind = body_format(request.headers.get("content-type"))
    others = tuple(fmt for fmt in codecs.FORMATS if fmt != kind)
    fmt = query.format or codecs.negotiate(request.headers.get("accept"), (kind, *others))
    gzip = fmt == "json" and codecs.accepts_gzip(request.headers.get("accept-encoding"))
    body = await read_body(request, settings.max_body_bytes)
    headers, content = await offload(
        request, batches.apply_batch, body, kind, fmt, query, cache, settings, gzip
    )
    return Response(content, headers={**headers, "cache-control": "no-store"})


@router.get(
    "/v1/cache",
    operation_id="getCacheStats",
    summary="Cache statistics: entries, bytes, budget, hits, misses, evictions.",
)
async def get_cache_stats(cache: CacheDep, response: Response) -> CacheDocument:
    """Cache statistics: entries, bytes, budget, hits, misses, evictions."""
    stats = cache.stats()
    response.headers["cache-control"] = "no-store"
    return CacheDocument(
        budget_bytes=stats.budget_bytes,
        bytes=stats.bytes,
        hits=stats.hits,
        misses=stats.misses,
        evictions=stats.evictions,
        uncached=stats.uncached,
        responses=stats.responses,
        response_bytes=stats.response_bytes,
        response_hits=stats.response_hits,
        entries=[
            CacheEntry(
                d_model=entry.key.d_model,
                base=entry.key.base,
                layout=entry.key.layout,
                dtype=entry.key.dtype,
                rows=entry.rows,
                bytes=entry.bytes,
            )
            for entry in stats.entries
        ],
    )


@router.get(
    "/metrics",
    operation_id="getMetrics",
    summary="Prometheus metrics: requests by route and status, latency, the cache.",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request) -> Response:
    """Prometheus metrics: requests by route and status, latency, the cache."""
    registry = request.app.state.telemetry.registry
    return Response(generate_latest(registry), headers={"content-type": CONTENT_TYPE_LATEST})


@router.get("/healthz", operation_id="getHealth", summary="Liveness: the process answers.")
async def healthz() -> Status:
    """Liveness: the process answers."""
    return Status(status="ok")


@router.get(
    "/readyz",
    operation_id="getReadiness",
    summary="Readiness: 200 once the PE_PRELOAD tables are computed, 503 before.",
    responses={503: {"model": Problem, "content": {PROBLEM_MEDIA_TYPE: {}}}},
)
async def readyz(request: Request) -> Any:
    """Readiness: 200 once the PE_PRELOAD tables are computed, 503 before."""
    state = request.app.state
    if state.preload_error is not None:
        return problem(503, f"preloading tables failed: {state.preload_error}")
    if not state.ready:
        return problem(503, "still preloading the PE_PRELOAD tables", headers={"retry-after": "1"})
    return Status(status="ready")
