"""``POST /v1/compare``: two tables side by side, each given as a family's ``GET``
parameters or as a model's config with from-config's (``{"family": "rotary", "config":
{...}, "parameters": {"engine": "vllm"}}``), over a range of positions: their difference
by band, where it first passes the thresholds, and each rotary pair's angle drift
(:mod:`service.audit.compare`). transformers' YaRN against vLLM's for one config, a
training config against an inference one, ``library`` against ``exact``: one request.

JSON or a PNG of ``|a - b|`` (by ``format``, else ``Accept``), computed off the event loop
in the lane its numbers choose, a large one in the large answers' turns; the picture's
entries are reduced to its pixels as they are computed."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Final, Literal, NamedTuple

import anyio
import numpy as np
import orjson
from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service import handlers, plots
from service.audit import compare
from service.audit import paths as audit_paths
from service.codecs.types import Encoded
from service.encodings import registry
from service.encodings.registry import Key
from service.errors import InvalidInput
from service.runtime import Runtime
from service.schemas.hf_config import read_config
from service.settings import POSITION_CEILING
from service.web import openapi
from service.web.answers import MEDIA, Offer, Plan, answer
from service.web.declared import Declared
from service.web.deps import RuntimeDep
from service.web.documents import in_table, posted_document, read_fields

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


# the picture draws at most this many positions, each about a pixel high
DRAWN_ROWS: Final = 512
CompareFormat = Literal["json", "png"]
_FORMATS: Final[tuple[CompareFormat, ...]] = ("json", "png")
# the comparison's own fields, which a table's parameters must not hold (they were ignored)
_COMPARISON_FIELDS: Final = ("start", "stop", "format")


class Spec(NamedTuple):
    """A table to compare: its key, and how the picture's title names it."""

    key: Key
    said: str


def router(families: Iterable[Declared[Any, Any]]) -> APIRouter:
    """The route, for the ``families`` cached by rows that carry the audit's record."""
    known = {
        each.family.name: each
        for each in families
        if each.family.block is None and each.family.audit is not None
    }
    routes = APIRouter(tags=["audit"])

    async def post(
        request: Request,
        runtime: RuntimeDep,
        format: Annotated[
            Literal["json", "png"] | None,
            Query(
                description="json, or png: |a - b| over positions and entries; default by "
                "Accept, else json."
            ),
        ] = None,
    ) -> Response:
        offer = Offer(_FORMATS, format)
        offer.chosen(request)  # an unacceptable answer is refused before the body is read
        # its length: the lane a config in it is read in
        size, asked = await posted_document(request, runtime, _measured)
        if asked.stop <= asked.start:
            raise InvalidInput("stop", f"must be above start ({asked.start})")
        a = await _spec(runtime, known, asked.a, "a", asked.stop, size)
        b = await _spec(runtime, known, asked.b, "b", asked.stop, size)
        # the entries a position has, from the keys: no row computed on the event loop
        width_a, width_b = audit_paths.width(a.key), audit_paths.width(b.key)
        if width_a != width_b:
            raise InvalidInput(
                "b", f"its entries are {width_b} a row, a's {width_a}: not comparable"
            )
        runtime.limits.last_position(asked.stop - 1, "the last position compared")
        start, stop = asked.start, asked.stop

        def check(fmt: CompareFormat) -> None:
            if fmt == "png":
                plots.require()
                drawn, _ = compare.drawn(start, stop, DRAWN_ROWS)
                runtime.limits.rows(2 * len(drawn), width_a, "positions drawn × 2 × width")
            else:
                runtime.limits.rows(
                    2 * compare.cost(start, stop),
                    width_a,
                    "positions compared and refined, at most, × 2 × width",
                )

        async def encode(fmt: CompareFormat, gzip: bool) -> Encoded:
            if fmt == "png":
                positions, step = compare.drawn(start, stop, DRAWN_ROWS)
                picture = await _picture(runtime, a, b, positions, step, stop)
                return {}, picture
            found = await _compared(runtime, a, b, start, stop, compare.cost(start, stop))
            return {}, orjson.dumps({"start": start, "stop": stop, **found})

        return await answer(request, runtime, Plan(offer, encode, check=check, gzip_from=None))

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
                "content": {MEDIA["json"]: {}, MEDIA["png"]: openapi.BINARY},
                "description": "The comparison, or its difference heatmap.",
            },
            **openapi.problems_of(400, 406, 413, 415, 422, 501),
        },
    )
    return routes


def _measured(body: bytes | bytearray) -> tuple[int, Comparison]:
    """The posted body's length, and the comparison it holds, read as a config is (bounded,
    no key given twice), its refusals located in the body. A worker's: a body of
    ``PE_MAX_CONFIG_BYTES`` (1 MiB) may hold 87,000 fields a table, 16 ms to validate."""
    try:
        return len(body), Comparison.model_validate(read_config(body))
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def _query(
    declared: Declared[Any, Any], name: str, table: Table, parameters: dict[str, Any]
) -> Any:
    """The table's query made from ``parameters``, its refusals located in the body: a
    worker's, as parameters as many as a body holds (87,000 unknown ones: 0.5 s) are."""
    with in_table(name, table.parameters, table.config is not None):
        return declared.query.model_validate(parameters)


def _cost(a: Spec, b: Spec, positions: int) -> tuple[int, bool]:
    """What computing ``positions`` positions of each table costs: its numbers (its lane),
    and whether it takes a turn of the large answers (its rows pass their bytes, as a large
    table's do: :func:`service.handlers.permit`)."""
    numbers = 2 * positions * audit_paths.width(a.key)
    elements = numbers + registry.preparation(a.key) + registry.preparation(b.key)
    return elements, 8 * numbers > handlers.LARGE_ANSWER_BYTES


async def _compared(
    runtime: Runtime, a: Spec, b: Spec, start: int, stop: int, evaluated: int
) -> dict[str, Any]:
    """The comparison of ``start .. stop-1``, charged for the ``evaluated`` positions of
    each table :func:`compare.cost` counts."""
    elements, large = _cost(a, b, evaluated)
    async with handlers.permit(runtime, large):
        return await runtime.compute(elements, compare.compare, a.key, b.key, start, stop)


async def _picture(
    runtime: Runtime, a: Spec, b: Spec, positions: NDArray[np.int64], step: int, stop: int
) -> bytes:
    """The difference heatmap, its entries reduced to the picture's columns as they are
    computed, then drawn (one picture at a time); a large one in the large answers' turns,
    as a heatmap's."""
    width, _ = plots.DIFFERENCE_SIZE
    start, last = int(positions[0]), int(positions[-1])
    rows = plots.Axis("position", start, last, step)
    columns = plots.Axis(
        "entry (rotary: each pair's cos, then sin)", 0, audit_paths.width(a.key) - 1
    )
    spaced = f", every {step:,}" if step > 1 else ""
    title = f"|a - b| at positions {start:,} to {stop - 1:,}{spaced}\na: {a.said}\nb: {b.said}"
    elements, large = _cost(a, b, len(positions))
    async with handlers.permit(runtime, large):
        matrix = await runtime.compute(
            elements, compare.heatmap, a.key, b.key, positions, columns=width
        )
        draw = functools.partial(plots.difference, matrix, rows, columns, title=title)
        return await anyio.to_thread.run_sync(draw, limiter=runtime.painter)


async def _spec(
    runtime: Runtime,
    known: Mapping[str, Declared[Any, Any]],
    table: Table,
    name: str,
    stop: int,
    size: int,
) -> Spec:
    """The key ``table`` names, and its parameters said shortly; its refusals located in
    the body (``a.parameters.base``, ``a.config.rope_theta``). A config (its share of the
    body's ``size`` bytes) is read in the lane that size takes."""
    declared = known.get(table.family)
    if declared is None:
        raise InvalidInput(f"{name}.family", f"must be one of {', '.join(known)}")
    misplaced = [field for field in _COMPARISON_FIELDS if field in table.parameters]
    if misplaced:
        raise InvalidInput(
            f"{name}.parameters.{misplaced[0]}",
            "is the comparison's, not a table's: start and stop go beside a and b, format "
            "in the query",
        )
    parameters = dict(table.parameters)
    if table.config is not None:
        spec = declared.from_document
        if spec is None:
            raise InvalidInput(f"{name}.config", f"{table.family} tables are not read from configs")
        with in_table(name, parameters, table.config is not None):
            # those from-config takes checked as it checks them (head_dim_key a string)
            reading = {
                key: value for key, value in parameters.items() if key in spec.query.model_fields
            }
            checked = spec.query.model_validate(reading).model_dump(exclude_unset=True)
            asked = {**parameters, **checked}
            read = await read_fields(runtime, spec, table.config, asked, size)
        several = spec.several(read)
        if several is not None:
            raise InvalidInput(f"{name}.parameters.layer_type", f"{several}: name one")
        with in_table(name, table.parameters, True):
            # the range compared is the table's length where neither says one
            parameters = spec.parameters(read, parameters, under={"max_len": stop})
    if "max_len" in declared.query.model_fields:  # not a grid's, whose rows its grid says
        parameters.setdefault("max_len", stop)
    query = await runtime.compute(len(parameters), _query, declared, name, table, parameters)
    with in_table(name, table.parameters, table.config is not None):
        key: Key = await declared.key_of(runtime, query)
    rows = declared.block(query, key).max_len
    if stop > rows:
        raise InvalidInput("stop", f"is past the {rows} rows of {name}'s table")
    given = query.model_dump(exclude_unset=True)
    if given.get("max_len") == stop:
        del given["max_len"]  # the range compared says it
    # what each table must say first (its width), then the rest
    fields = declared.query.model_fields
    required = {each for each, field in fields.items() if field.is_required()}
    shown = sorted(given, key=lambda field: field not in required)
    said = " ".join(f"{field}={_shown(given[field])}" for field in shown)
    return Spec(key, f"{table.family} {said}".strip())


def _shown(value: Any) -> str:
    """A parameter's value as a title says it: ``10000`` for ``10000.0``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)
