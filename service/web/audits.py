"""``GET /v1/audit/{family}``, for any family that declares it (:attr:`Declared.audit`): the
family's table parameters and what to audit; the answer is :mod:`service.audit`'s, as JSON
or as a PNG, with a strong ETag and ``immutable`` (an audit is a pure function of its
parameters; JSON or PNG by ``format``, else by ``Accept``). What an audit will evaluate is
counted before anything is computed (:func:`service.audit.report.cost`): the limits, the
``304``, the lane and the permit are decided from that count; the audit runs off the event
loop."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final, Literal

import anyio
import orjson
from fastapi import APIRouter, Request, Response

from service import handlers, plots
from service.audit import bands, report
from service.audit import paths as audit_paths
from service.codecs.types import Encoded
from service.encodings import registry
from service.errors import InvalidParameter
from service.runtime import QUICK_ELEMENTS, Runtime
from service.schemas.audit import DROPPED, AuditFields, audit_query, chosen, edges
from service.web import answers, layered, openapi
from service.web.conditional import fields_etag
from service.web.declared import Declared, FromDocument
from service.web.deps import endpoint
from service.web.documents import located, posted_read

# Bump when an audit's answer changes for the same parameters: tests/audit/test_revision.py
# holds the hashes of a few answers under the revision they belong to, and fails when they
# change under the same one ("1" answered two versions of some audits: 478e079 changed them).
AUDIT_REVISION: Final = "2"
# what an audit answers in, by format= or else by Accept (the first when it names neither)
AuditFormat = Literal["json", "png"]
FORMATS: Final[tuple[AuditFormat, ...]] = ("json", "png")
REFERENCE: Final = "the exact table (rounding=exact) in float64"


def path_names(declared: Declared[Any, Any]) -> list[str]:
    """The paths of ``declared``'s audit (every one its record may give)."""
    record = declared.family.audit
    assert record is not None  # checked as its routes are made
    return report.names_of(record)


def route(routes: APIRouter, declared: Declared[Any, Any]) -> None:
    """``GET /v1/audit/{name}`` on ``routes``, and its from-config where declared."""
    name = declared.family.name
    if declared.from_document is not None:
        from_document(routes, declared, declared.from_document)
    query_model = audit_query(
        declared.query, f"{name.title().replace('-', '')}AuditQuery", path_names(declared)
    )

    async def get(query: Any, request: Request, runtime: Runtime) -> Response:
        # what the client gave: a default the table's query leaves out (a preset's base)
        # must stay out
        asked = query.model_dump(exclude_unset=True, exclude=set(AuditFields.model_fields))
        return await answer(request, runtime, declared, asked, asked, query)

    routes.add_api_route(
        f"/v1/audit/{name}",
        endpoint(get, query_model),
        methods=["GET"],
        operation_id=f"audit{name.title().replace('-', '')}",
        summary=f"How far each computation path's {name} table is from the exact one, by "
        "position band: the largest and mean error, where it first passes 1e-3, 1e-2, 1e-1.",
        response_class=Response,
        responses={
            200: {
                "content": {answers.MEDIA["json"]: {}, answers.MEDIA["png"]: openapi.BINARY},
                "description": "The audit, JSON ({paths: [...]}) or a PNG.",
            },
            304: openapi.NOT_MODIFIED,
            **openapi.problems_of(406, 422, 501),
        },
    )


async def answer(
    request: Request,
    runtime: Runtime,
    declared: Declared[Any, Any],
    given: dict[str, Any],
    asked: Mapping[str, Any],
    query: Any,
) -> Response:
    """The audit of the table ``given`` names (``asked``: what the request said of it),
    with ``query``'s paths, bands and format."""
    name = declared.family.name
    with located(asked):
        table = declared.query.model_validate(given)
        key = await declared.key_of(runtime, table)
    # positions 0 .. max_len-1, or as far as the family's entries reach
    max_len = audit_paths.extent(key, declared.block(table, key).max_len)
    limits = runtime.limits
    limits.last_position(max_len - 1 + registry.shift(key), "the last position audited")
    width = audit_paths.width(key)
    if not width:  # a timestep table of width 1 is one zero column: nothing to measure
        with located(asked):
            raise InvalidParameter(declared.width_name, "gives a table with no entry to audit")
    paths = chosen(query.paths, report.names(key))
    cuts = edges(query.bands, max_len)
    # what the audit will evaluate, counted without building a position: nothing is
    # computed before the limits, the 304, the lane and the permit are decided
    cost = report.cost(key, max_len, paths, cuts)
    # each path's entries and the exact ones, at every position of its plan
    limits.rows(cost.positions * (len(paths) + 1), width, "positions audited × paths × width")
    described = {
        field: value
        for field, value in declared.describe(table, key).items()
        if field not in DROPPED and field != "shape"
    }
    fields = {**described, "paths": paths, "bands": cuts}

    def check(fmt: AuditFormat) -> None:
        if fmt == "png":
            plots.require()

    def etag(fmt: AuditFormat, gzip: bool) -> str:
        parts = (AUDIT_REVISION, name, fmt, plots.version() if fmt == "png" else "")
        return fields_etag(*parts, fields=fields)

    async def encode(fmt: AuditFormat, gzip: bool) -> Encoded:
        work = functools.partial(report.audit, key, max_len, paths, cuts)
        # past the quick lane's budget, an audit takes a permit as a large table does,
        # while it is computed
        async with handlers.permit(runtime, cost.charge > QUICK_ELEMENTS):
            found = await runtime.compute(cost.charge, work)
        document = {"family": name, "parameters": described, "reference": REFERENCE, **found}
        if fmt == "json":
            return {}, orjson.dumps(document)
        picture = await anyio.to_thread.run_sync(
            functools.partial(_picture, document), limiter=runtime.painter
        )
        return {}, picture

    offer = answers.Offer(FORMATS, query.format)
    plan = answers.Plan(offer, encode, check=check, etag=etag, gzip_from=None)
    return await answers.answer(request, runtime, plan)


def from_document(routes: APIRouter, declared: Declared[Any, Any], spec: FromDocument) -> None:
    """``POST /v1/audit/{name}/from-config``: the audit of the table a config makes."""
    name = declared.family.name
    query_model = audit_query(
        spec.query, f"{name.title().replace('-', '')}AuditFromConfig", path_names(declared)
    )

    async def post(query: Any, request: Request, runtime: Runtime) -> Response:
        asked = query.model_dump(exclude_none=True, exclude=set(AuditFields.model_fields))
        read = await posted_read(request, runtime, spec, asked)
        several = spec.several(read)
        if several is not None:
            raise InvalidParameter("layer_type", f"{several}: audit one with layer_type")
        given = spec.parameters(read, asked)
        for field in spec.reading:
            asked.pop(field, None)
        response = await answer(request, runtime, declared, given, asked, query)
        response.headers.update(layered.said(read))
        return response

    routes.add_api_route(
        f"/v1/audit/{name}/from-config",
        endpoint(post, query_model),
        methods=["POST"],
        operation_id=f"audit{name.title().replace('-', '')}FromConfig",
        summary=f"The audit of the {name} table a model's config.json makes.",
        response_class=Response,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object"}}},
                "description": spec.body,
            }
        },
        responses={
            200: {
                "content": {answers.MEDIA["json"]: {}, answers.MEDIA["png"]: openapi.BINARY},
                "description": "The audit, JSON ({paths: [...]}) or a PNG.",
            },
            **openapi.problems_of(400, 406, 413, 415, 422, 501),
        },
    )


def _picture(document: dict[str, Any]) -> bytes:
    lines = []
    for path in document["paths"]:
        spans = path["bands"]
        middles = [max(0.5, (span["start"] * max(span["stop"] - 1, 1)) ** 0.5) for span in spans]
        lines.append((path["name"], middles, [span["max_error"] for span in spans]))
    parameters = ", ".join(f"{k}={v}" for k, v in document["parameters"].items())
    title = f"{document['family']} audit against {REFERENCE}\n{parameters}"
    return plots.audit(lines, bands.THRESHOLDS, title=title)
