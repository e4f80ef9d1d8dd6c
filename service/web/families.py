"""A family declared once, served by the generic machinery.

:class:`Declared` says what a family's ``GET`` takes (its query model), the key and the
block of rows a query names, and the fields its JSON answer states; :func:`router` builds
the rest: the ``GET`` route (``HEAD`` from :mod:`service.middleware.head`) with its OpenAPI
answers, the formats (named members for a row's named arrays), strong ETags and 304, the
replay of repeats, permits, the element limits, and, where declared, a key from a posted
document (``POST .../from-config``, :class:`FromDocument`) and the rows at posted position
ids (``POST .../positions``, :mod:`service.web.positions`). What a family is (its key,
its rows or blocks, its bound) is :mod:`service.encodings.registry`'s.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from service.codecs.types import Format
from service.encodings import registry
from service.encodings.registry import Family, Key, Rows
from service.errors import InvalidParameter
from service.handlers import Block
from service.limits import Limits
from service.runtime import Runtime
from service.web import openapi, positions
from service.web.deps import endpoint
from service.web.documents import located, posted_document
from service.web.responses import table_response

Q = TypeVar("Q", bound=BaseModel)
K = TypeVar("K", bound=Key)
# a Content-Location longer than this is left out (longrope's factors can make it long)
_MAX_LOCATION: Final = 8192


@dataclass(frozen=True, slots=True)
class FromDocument:
    """A key from a posted document (a model's ``config.json``): ``read`` parses and checks
    its bytes (in a worker thread), ``fields`` turns what it read into the ``GET``'s
    parameters, which the request's own (``query``: what the document does not say)
    override; ``missing`` says what to give for a required parameter found in neither."""

    read: Callable[[bytes | bytearray], dict[str, Any]]
    fields: Callable[[dict[str, Any]], dict[str, Any]]
    query: type[BaseModel]
    summary: str
    operation_id: str
    body: str
    missing: Mapping[str, str] = field(default_factory=dict)
    suffix: str = "/from-config"


@dataclass(frozen=True, slots=True)
class Positions(Generic[K]):
    """Rows at posted position ids. ``axes(key)``: 1 for ids of one axis (``(L,)`` or
    ``(B, L)``), ``n`` for a leading axis of ``n`` (an M-RoPE table's ``(3, L)``, a grid's
    ``(2, L)``); ``integers``: ids are integers (else any finite numbers, as diffusion
    timesteps); ``at(key, ids)``: the ``(N, width)`` rows of ``ids`` shaped ``(N,)`` or
    ``(n, N)``; required but for integer ids of one axis of a cached table, whose rows are
    read from the cache's pages where dense."""

    summary: str
    operation_id: str
    axes: Callable[[K], int] = lambda key: 1
    integers: bool = True
    at: Callable[[K, Any], Rows] | None = None


@dataclass(frozen=True, slots=True)
class Declared(Generic[Q, K]):
    """A family as its routes are built: the registry's family, the ``GET``'s path (default
    ``/v1/encodings/{name}``), query model and JSON answer's model; the query's key
    (``key_cost``: what building it costs in table numbers, 0: built on the event loop),
    the block it names, and the fields its answers state; ``width_name``: how limits name a
    row's width; ``check``: limits of its own instead of a table's; ``shape``: what
    ``X-Shape`` holds, for its OpenAPI."""

    family: Family[K]
    query: type[Q]
    key: Callable[[Q], K]
    block: Callable[[Q, K], Block]
    describe: Callable[[Q, K], Mapping[str, Any]]
    document: type[BaseModel]
    summary: str
    operation_id: str
    path: str = ""
    width_name: str = "width"
    key_cost: Callable[[Q], int] = lambda query: 0
    check: Callable[[Q, Limits, Format], None] | None = None
    shape: str = "rows,cols of the block"
    answer: str = "The table."
    from_document: FromDocument | None = None
    positions: Positions[K] | None = None
    # the path counts in the ETag (two families' fields may coincide); False for the
    # families whose tags predate the seam, which clients and caches hold
    path_in_etag: bool = True

    @property
    def resource(self) -> str:
        return self.path or f"/v1/encodings/{self.family.name}"

    async def key_of(self, runtime: Runtime, query: Q) -> K:
        """The query's key, checked: off the event loop where building it costs work (a new
        rotary key's exact frequencies)."""
        cost = self.key_cost(query)
        return self.key(query) if cost == 0 else await runtime.compute(cost, self.key, query)

    def preloaded(self, text: str) -> tuple[Key, int]:
        """``PE_PRELOAD``'s ``NAME?QUERY``: the key of a table and its rows from 0."""
        if self.family.block is not None:
            raise ValueError(f"{self.family.name} is computed per request, never kept")
        pairs = urllib.parse.parse_qsl(text, keep_blank_values=True, strict_parsing=True)
        fields = dict(pairs)
        if len(fields) < len(pairs):
            raise ValueError("a parameter is given more than once; give each parameter once")
        query = self.query.model_validate(fields)
        key = self.key(query)
        return key, self.block(query, key).stop


async def table(
    request: Request, runtime: Runtime, declared: Declared[Q, K], query: Q, key: K
) -> Response:
    """The block ``query`` names of ``key``'s table, as :func:`table_response` serves it."""
    check = declared.check
    return await table_response(
        request,
        runtime,
        declared.block(query, key),
        declared.describe(query, key),
        getattr(query, "format", None),
        declared.width_name,
        None if check is None else lambda fmt: check(query, runtime.limits, fmt),
        declared.resource if declared.path_in_etag else "",
    )


def router(declared: Declared[Any, Any]) -> APIRouter:
    """The routes of ``declared``'s family; the family known to the registry."""
    registry.register(declared.family)
    routes = APIRouter()
    media = {**openapi.TABLE_MEDIA, **({"application/x-npz": {}} if declared.family.arrays else {})}
    headers = {
        **openapi.TABLE_HEADERS,
        "X-Shape": {"description": f"raw only: {declared.shape}.", "schema": {"type": "string"}},
    }
    ok = {
        "model": declared.document,
        "content": media,
        "description": declared.answer,
        "headers": headers,
    }

    async def get(query: Any, request: Request, runtime: Runtime) -> Response:
        return await table(request, runtime, declared, query, await declared.key_of(runtime, query))

    routes.add_api_route(
        declared.resource,
        endpoint(get, declared.query),
        methods=["GET"],
        operation_id=declared.operation_id,
        summary=declared.summary,
        description=declared.summary,
        response_class=Response,
        responses={200: ok, 304: openapi.NOT_MODIFIED, **openapi.problems_of(406, 422)},
    )
    if declared.from_document is not None:
        _from_document(routes, declared, declared.from_document, ok)
    if declared.positions is not None:
        positions.route(routes, declared, declared.positions)
    return routes


def _from_document(
    routes: APIRouter, declared: Declared[Any, Any], spec: FromDocument, ok: dict[str, Any]
) -> None:
    async def post(query: Any, request: Request, runtime: Runtime) -> Response:
        given = spec.fields(await posted_document(request, runtime, spec.read))
        asked = query.model_dump(exclude_none=True)
        given.update(asked)
        for name, message in spec.missing.items():
            if name not in given:
                raise InvalidParameter(name, message)
        with located(asked):
            table_query = declared.query.model_validate(given)
            key = await declared.key_of(runtime, table_query)
        response = await table(request, runtime, declared, table_query, key)
        location = f"{declared.resource}?{urllib.parse.urlencode(given)}"
        if len(location) <= _MAX_LOCATION:
            response.headers["content-location"] = location
        return response

    body = {"application/json": {"schema": {"type": "object"}}}
    routes.add_api_route(
        declared.resource + spec.suffix,
        endpoint(post, spec.query),
        methods=["POST"],
        operation_id=spec.operation_id,
        summary=spec.summary,
        description=f"{spec.summary} ``Content-Location`` is the ``GET`` of the same table.",
        response_class=Response,
        openapi_extra={
            "requestBody": {"required": True, "content": body, "description": spec.body}
        },
        responses={
            200: ok,
            **openapi.problems_of(400, 406, 408, 413, 415, 422),
            **openapi.BUSY,
        },
    )


def readers(declared: Iterable[Declared[Any, Any]]) -> dict[str, Callable[[str], tuple[Key, int]]]:
    """``PE_PRELOAD``'s readers of ``NAME?QUERY``, for the families cached by rows."""
    return {each.family.name: each.preloaded for each in declared if each.family.block is None}
