"""A family declared once, served by the generic machinery.

A declaration (:mod:`service.web.declared`) says what a family's ``GET`` takes (its query
model), the key and the block of rows a query names, and the fields its JSON answer
states; :func:`router` builds the rest: the ``GET`` route (``HEAD`` from
:mod:`service.middleware.head`) with its OpenAPI answers, the formats (named members for a
row's named arrays), strong ETags and 304, the replay of repeats, permits, the element
limits, and, where declared, a key from a posted document (``POST .../from-config``) and
the rows at posted position ids (``POST .../positions``, :mod:`service.web.positions`).
What a family is (its key, its rows or blocks, its bound) is
:mod:`service.encodings.registry`'s.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any, Final

from fastapi import APIRouter, Request, Response

from service.encodings import registry
from service.encodings.registry import Key
from service.runtime import Runtime
from service.web import audits, layered, openapi, positions
from service.web.declared import Declared, FromDocument, K, Q
from service.web.deps import endpoint
from service.web.documents import located, posted_read
from service.web.responses import table_response

# a Content-Location longer than this is left out (longrope's factors can make it long)
_MAX_LOCATION: Final = 8192


async def table(
    request: Request, runtime: Runtime, declared: Declared[Q, K], query: Q, key: K
) -> Response:
    """The block ``query`` names of ``key``'s table, as :func:`table_response` serves it."""
    check = declared.check
    return await table_response(
        request,
        runtime,
        declared.offer(query),
        declared.block(query, key),
        declared.describe(query, key),
        declared.width_name,
        None if check is None else lambda fmt: check(query, runtime.limits, fmt),
        declared.resource if declared.path_in_etag else "",
    )


def router(declared: Declared[Any, Any]) -> APIRouter:
    """The routes of ``declared``'s family; the family known to the registry.

    Raises ``TypeError`` for a family that declares an audit without the audit's record.
    """
    if declared.audit and declared.family.audit is None:
        raise TypeError(
            f"family {declared.family.name} declares audit=True but its registry.Family has "
            "no audit record (registry.Audit): give it one, or declare no audit"
        )
    registry.register(declared.family)
    routes = APIRouter(tags=[declared.tag or declared.family.name])
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
    if declared.audit:
        audits.route(routes, declared)
    return routes


def _from_document(
    routes: APIRouter, declared: Declared[Any, Any], spec: FromDocument, ok: dict[str, Any]
) -> None:
    async def post(query: Any, request: Request, runtime: Runtime) -> Response:
        asked = query.model_dump(exclude_none=True)
        read = await posted_read(request, runtime, spec, asked)
        for name in spec.reading:
            asked.pop(name, None)
        if spec.several(read) is not None:  # one table per kind of layer
            return await layered.response(request, runtime, declared, spec, read, asked)
        given = spec.parameters(read, asked)
        with located(asked):
            table_query = declared.query.model_validate(given)
            key = await declared.key_of(runtime, table_query)
        response = await table(request, runtime, declared, table_query, key)
        location = f"{declared.resource}?{urllib.parse.urlencode(given)}"
        if len(location) <= _MAX_LOCATION:
            response.headers["content-location"] = location
        response.headers.update(layered.said(read))
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
