"""``POST /v1/compare``: two tables side by side, each given as a family's ``GET``
parameters or as a model's config with from-config's (``{"family": "rotary", "config":
{...}, "parameters": {"engine": "vllm"}}``), over a range of positions: their difference
by band, where it first passes the thresholds, and each rotary pair's angle drift
(:mod:`service.audit.compare`). transformers' YaRN against vLLM's for one config, a
training config against an inference one, ``library`` against ``exact``: one request."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Final, Literal

import anyio
import orjson
from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service import plots
from service.audit import bands, compare
from service.audit import paths as audit_paths
from service.codecs.types import MEDIA_TYPES
from service.encodings.registry import Key
from service.errors import InvalidInput
from service.runtime import Runtime
from service.schemas.common import Read
from service.schemas.hf_config import read_config
from service.settings import POSITION_CEILING
from service.web import openapi
from service.web.declared import Declared
from service.web.deps import RuntimeDep
from service.web.disconnect import unless_gone
from service.web.documents import posted_document

PATH: Final = "/v1/compare"


class Table(BaseModel):
    """One table: a family and its ``GET`` parameters, or a config and from-config's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: str = Field(description="rotary, sinusoidal or temperature.")
    parameters: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] | None = Field(None, description="A model's config.json.")


class Comparison(BaseModel):
    """Two tables and the positions to compare them over."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    a: Table
    b: Table
    start: int = Field(0, ge=0, le=POSITION_CEILING)
    stop: int = Field(ge=1, le=POSITION_CEILING + 1)


def router(families: Iterable[Declared[Any, Any]]) -> APIRouter:
    """The route, for the ``families`` cached by rows."""
    known = {each.family.name: each for each in families if each.family.block is None}
    routes = APIRouter(tags=["audit"])

    async def post(
        request: Request,
        runtime: RuntimeDep,
        format: Annotated[
            Literal["json", "png"] | None,
            Query(description="json (default), or png: |a - b| over positions and entries."),
        ] = None,
    ) -> Response:
        document = await posted_document(request, runtime, read_config)
        try:
            asked = Comparison.model_validate(document)
        except ValidationError as exc:
            errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
            raise RequestValidationError(errors) from None
        if asked.stop <= asked.start:
            raise InvalidInput("stop", f"must be above start ({asked.start})")
        a = await _key(runtime, known, asked.a, "a", asked.stop)
        b = await _key(runtime, known, asked.b, "b", asked.stop)
        # the entries a position has, from the keys: no row computed on the event loop
        width_a, width_b = audit_paths.width(a), audit_paths.width(b)
        if width_a != width_b:
            raise InvalidInput(
                "b", f"its entries are {width_b} a row, a's {width_a}: not comparable"
            )
        limits = runtime.limits
        limits.last_position(asked.stop - 1, "the last position compared")
        evaluated = len(bands.plan(bands.bands(asked.stop)))
        limits.rows(2 * evaluated, width_a, "positions compared × 2 × width")
        if format == "png":
            plots.require()
            picture = await unless_gone(
                request, lambda: _picture(runtime, a, b, asked.start, asked.stop)
            )
            return Response(picture, media_type="image/png", headers={"cache-control": "no-store"})
        work = functools.partial(compare.compare, a, b, asked.start, asked.stop)
        found = await unless_gone(request, lambda: runtime.compute(evaluated * width_a, work))
        body = orjson.dumps({"start": asked.start, "stop": asked.stop, **found})
        headers = {"content-type": MEDIA_TYPES["json"], "cache-control": "no-store"}
        return Response(body, headers=headers)

    routes.add_api_route(
        PATH,
        post,
        methods=["POST"],
        operation_id="compareTables",
        summary="Two tables side by side: their difference by position band, where it first "
        "passes 1e-3, 1e-2, 1e-1, and each rotary pair's angle drift.",
        response_class=Response,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": openapi.inline(Comparison.model_json_schema())}
                },
            }
        },
        responses={
            200: {
                "content": {"application/json": {}, "image/png": openapi.BINARY},
                "description": "The comparison, or its difference heatmap.",
            },
            **openapi.problems_of(400, 413, 415, 422, 501),
        },
    )
    return routes


async def _picture(runtime: Runtime, a: Key, b: Key, start: int, stop: int) -> bytes:
    """The difference heatmap, computed then drawn (one picture at a time)."""
    matrix, step = await runtime.compute(512 * 2 * a.width, compare.heatmap, a, b, start, stop)
    positions = plots.Axis("position", start, start + step * (len(matrix) - 1), step)
    columns = plots.Axis("entry (rotary: each pair's cos, then sin)", 0, matrix.shape[1] - 1)
    title = f"|a - b| at positions {start:,} to {stop - 1:,}"
    draw = functools.partial(plots.difference, matrix, positions, columns, title=title)
    return await anyio.to_thread.run_sync(draw, limiter=runtime.painter)


async def _key(
    runtime: Runtime, known: Mapping[str, Declared[Any, Any]], table: Table, name: str, stop: int
) -> Key:
    """The key ``table`` names; its refusals located in the body (``a.parameters.base``)."""
    declared = known.get(table.family)
    if declared is None:
        raise InvalidInput(f"{name}.family", f"must be one of {', '.join(known)}")
    parameters = dict(table.parameters)
    if table.config is not None:
        spec = declared.from_document
        if spec is None:
            raise InvalidInput(f"{name}.config", f"{table.family} tables are not read from configs")
        got = spec.fields(table.config, parameters)
        read = got if isinstance(got, Read) else Read({"": got})
        if "" not in read.tables:
            raise InvalidInput(
                f"{name}.parameters.layer_type",
                f"the config makes one table per layer type ({', '.join(read.tables)}): name one",
            )
        for field in spec.reading:
            parameters.pop(field, None)
        parameters = {**read.tables[""], **parameters}
    parameters.setdefault("max_len", stop)
    try:
        query = declared.query.model_validate(parameters)
        key: Key = await declared.key_of(runtime, query)
        return key
    except ValidationError as exc:
        errors = [
            {**e, "loc": ("body", name, "parameters", *e["loc"])}
            for e in exc.errors(include_url=False)
        ]
        raise RequestValidationError(errors) from None
