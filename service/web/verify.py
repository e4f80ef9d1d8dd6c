"""``POST /v1/verify`` and ``POST /v1/identify``: a client's own table, against what a
family's ``GET`` (or a model's config) says it should be, or with no claim at all
(:mod:`service.audit.verify`, :mod:`service.audit.identify`).

The body is the table: ``.npy`` (one array, or a row's named arrays stacked as the ``GET``
sends them: ``(2, L, d)`` for ``cos`` and ``sin``), ``.npz`` or safetensors with ``cos`` and
``sin`` (or ``data``) and optionally ``position_ids``, raw bytes with their shape, or JSON
``{"cos": [[...]], "sin": [[...]]}`` (or ``"data"``), which may also hold the claim (``family``,
``parameters``, ``config``) and ``start``. The claim's ``GET`` parameters may instead be the
query's: ``?family=rotary&head_dim=128&base=500000``. Its ``max_len`` defaults to the rows
posted (``start`` + rows, or the largest position id + 1).

The body is read within ``PE_MAX_BODY_BYTES`` and the posted-bytes budget as apply's is, the
table's entries within ``PE_MAX_ELEMENTS``; both answers are computed in a worker thread,
in the lane their entries choose, a large one in the large answers' turns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

import numpy as np
import orjson
from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from numpy.typing import NDArray
from pydantic import ValidationError

from service import batches, codecs, handlers
from service.audit import identify as identifying
from service.audit import verify as verifying
from service.codecs import json as json_codec
from service.codecs import npy, npz, raw, safetensors
from service.codecs.types import BODY_FORMATS, MEDIA_TYPES, Encoded
from service.encodings import registry
from service.encodings.registry import Key
from service.errors import InvalidInput, InvalidParameter, MalformedBody
from service.limits import Limits, reserving
from service.runtime import Runtime
from service.settings import POSITION_CEILING
from service.web import openapi, tables
from service.web.answers import Offer, Plan, answer
from service.web.bodies import body_format, raw_layout, read_posted
from service.web.declared import Declared
from service.web.deps import RuntimeDep
from service.web.negotiation import combined
from service.web.tables import Table

VERIFY: Final = "/v1/verify"
IDENTIFY: Final = "/v1/identify"
MEMBERS: Final = ("cos", "sin", "data", "position_ids")
# the query's own fields; any other is the claim's GET parameter
_OWN: Final = ("family", "start", "format", "shape", "dtype")


def _arrays(
    kind: str,
    body: bytearray,
    runtime: Runtime,
    layout: tuple[tuple[int, ...], str] | None,
    hold: Any,
) -> tuple[dict[str, Any], dict[str, NDArray[Any]]]:
    """The posted table's arrays, and a JSON body's other fields."""
    limits = runtime.limits
    if not body and kind != "raw":
        raise MalformedBody("the body is empty: send the table (.npy, .npz, safetensors, JSON)")
    if kind == "json":
        return json_codec.table(body, limits.json_elements)
    if kind == "npy":
        return {}, {"data": npy.decode(body, "table")}
    if kind == "raw":
        assert layout is not None
        return {}, {"data": raw.decode(body, *layout)}
    if kind == "npz":
        archive = npz.opened(body)
        names = [info.filename.removesuffix(".npy") for info in archive.infolist()]
        return {}, npz.decode(body, limits.body_bytes, _members(names), (), hold, archive)
    return {}, safetensors.decode(body, _members(safetensors.names(body)), ())


def _members(names: Iterable[str]) -> tuple[str, ...]:
    """The members a posted table may hold: :data:`MEMBERS`, and a layer type's own
    (``NAME/cos``, ``NAME/sin``, ``NAME/data``), as from-config's answers name them."""
    typed = (name for name in names if json_codec.LAYER_MEMBER.fullmatch(name))
    return (*MEMBERS, *typed)


def rows_of(
    arrays: Mapping[str, NDArray[Any]], limits: Limits
) -> tuple[tuple[NDArray[Any], ...], str]:
    """The posted table's arrays as :class:`service.audit.verify.Posted` takes them (as
    they were sent: never copied whole), and their dtype: ``cos`` and ``sin``, or one array
    (``data``: ``(L, d)``, or ``(2, L, d)`` read as ``cos`` and ``sin``, as an ``.npy`` of a
    rotary table holds them). Its entries are counted against ``PE_MAX_ELEMENTS`` and its
    row's width against ``PE_MAX_WIDTH``."""
    if ("cos" in arrays) != ("sin" in arrays):
        raise InvalidInput("sin" if "cos" in arrays else "cos", "is required beside the other")
    if "cos" in arrays and "data" in arrays:
        raise InvalidInput("data", "give cos and sin, or data, not both")
    if "cos" in arrays:
        parts = [arrays["cos"], arrays["sin"]]
    elif "data" in arrays:
        data = arrays["data"]
        parts = list(data) if data.ndim == 3 and data.shape[0] == 2 else [data]
    else:
        raise InvalidInput("data", "the table is required: cos and sin, or data")
    for name, part in zip(("cos", "sin") if len(parts) == 2 else ("data",), parts, strict=True):
        if part.ndim != 2 or not part.shape[0] or not part.shape[1]:
            raise InvalidInput(name, f"must be rows × width with both above 0, not {part.shape}")
        if part.dtype.kind != "f":
            raise InvalidInput(name, f"must hold floats, not {part.dtype}")
    if len(parts) == 2 and parts[0].shape != parts[1].shape:
        raise InvalidInput("sin", f"its shape {parts[1].shape} is not cos's {parts[0].shape}")
    width = sum(int(part.shape[1]) for part in parts)
    limits.row_width(width, "the posted table's row (its arrays side by side)")
    limits.rows(int(parts[0].shape[0]), width, "the posted table's rows × width")
    dtypes = {str(part.dtype) for part in parts}
    if len(dtypes) > 1:
        raise InvalidInput("sin", f"its dtype {parts[1].dtype} is not cos's {parts[0].dtype}")
    return tuple(parts), dtypes.pop()


def _positions(arrays: Mapping[str, NDArray[Any]], start: int, count: int) -> NDArray[np.int64]:
    ids = arrays.get("position_ids")
    if ids is None:
        if start + count - 1 > POSITION_CEILING:
            raise InvalidParameter("start", f"the last row's position passes {POSITION_CEILING}")
        return np.arange(start, start + count, dtype=np.int64)
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu" or ids.ndim != 1:
        raise InvalidInput("position_ids", "must be integers, one a row: (L,)")
    if len(ids) != count:
        raise InvalidInput("position_ids", f"holds {len(ids)} ids for {count} rows")
    if ids.min() < 0 or ids.max() > POSITION_CEILING:
        raise InvalidInput("position_ids", f"must be from 0 to {POSITION_CEILING}")
    return ids.astype(np.int64)


def _maker(declared: Declared[Any, Any]) -> verifying.Make:
    def make(parameters: Mapping[str, Any]) -> Key:
        key: Key = declared.key(declared.query.model_validate(dict(parameters)))
        return key

    return make


def _offer(query: Mapping[str, str]) -> Offer[Any]:
    """What the answer is offered in: JSON (``format=json``, or none)."""
    asked = query.get("format")
    if asked not in (None, "json"):
        raise InvalidParameter("format", "must be json: the answer is a JSON document")
    return Offer(("json",), asked)


def _query(request: Request) -> dict[str, str]:
    """The query's parameters, each given once."""
    pairs = request.query_params.multi_items()
    given: dict[str, str] = {}
    for name, value in pairs:
        if name in given:
            raise InvalidParameter(name, "is given more than once; give it once")
        given[name] = value
    return given


class _Rows(NamedTuple):
    """One posted table: its arrays, their dtype, and each row's position."""

    parts: tuple[NDArray[Any], ...]
    dtype: str
    positions: NDArray[np.int64]

    def posted(self) -> verifying.Posted:
        return verifying.Posted(self.parts, self.dtype, self.positions)


class _Table(NamedTuple):
    """A posted body, read: a JSON body's other fields, its tables (``""``: the one table;
    else one per layer type, by name), and the body's length."""

    fields: dict[str, Any]
    tables: dict[str, _Rows]
    size: int


def _layers(arrays: Mapping[str, NDArray[Any]]) -> dict[str, dict[str, NDArray[Any]]]:
    """The arrays by table: ``""`` for members without a layer type's name, else each
    layer type's (``NAME/cos``); ``position_ids`` given to each. Both at once are refused."""
    groups: dict[str, dict[str, NDArray[Any]]] = {}
    for name, array in arrays.items():
        layer, _, member = name.rpartition("/")
        if member != "position_ids":
            groups.setdefault(layer, {})[member] = array
    if "" in groups and len(groups) > 1:
        other = next(name for name in groups if name)
        raise InvalidInput(
            f"{other}/{next(iter(groups[other]))}",
            "a body holds one table, or one per layer type (NAME/cos, NAME/sin), not both",
        )
    shared = {"position_ids": arrays["position_ids"]} if "position_ids" in arrays else {}
    return {layer: {**members, **shared} for layer, members in (groups or {"": {}}).items()}


def _decoded(
    kind: str,
    body: bytearray,
    runtime: Runtime,
    layout: tuple[tuple[int, ...], str] | None,
    hold: Any,
    query: Mapping[str, str],
) -> _Table:
    """The whole reading of a posted body, in a worker thread: decoded, its limits
    checked, its tables' rows made and placed."""
    fields, arrays = _arrays(kind, body, runtime, layout, hold)
    start = _start(query, fields)
    tables = {}
    for layer, members in _layers(arrays).items():
        parts, dtype = rows_of(members, runtime.limits)
        positions = _positions(members, start, len(parts[0]))
        runtime.limits.last_position(int(positions.max()), "the largest position posted")
        tables[layer] = _Rows(parts, dtype, positions)
    return _Table(fields, tables, len(body))


async def _read(request: Request, runtime: Runtime, query: Mapping[str, str]) -> _Table:
    """The posted table, read within the body limits and decoded in a worker thread."""
    raw_headers = request.scope["headers"]
    kind = body_format(combined(raw_headers, b"content-type"), BODY_FORMATS)
    layout = None
    if kind == "raw":
        layout = raw_layout(raw_headers, query.get("shape"), query.get("dtype"))
    for name in ("shape", "dtype"):
        if name in query and kind != "raw":
            raise InvalidParameter(name, "is for a raw body (application/octet-stream) only")
    with reserving(runtime.posted) as reservation:
        body = await read_posted(request, runtime, runtime.limits.body_bytes, reservation)
        return await runtime.compute(
            len(body) // 4, _decoded, kind, body, runtime, layout, reservation.take, query
        )


def _start(query: Mapping[str, str], fields: Mapping[str, Any]) -> int:
    """The first row's position: the query's ``start`` (digits) or the JSON body's (an
    integer), 0 by default."""
    if "start" in query and "start" in fields:
        raise InvalidParameter("start", "is given in the query and the body: give it once")
    if "start" in query:
        text = query["start"]
        if not (text.isascii() and text.isdigit()) or int(text) > POSITION_CEILING:
            raise InvalidParameter("start", f"must be an integer from 0 to {POSITION_CEILING}")
        return int(text)
    value = fields.get("start", 0)
    if type(value) is not int or not 0 <= value <= POSITION_CEILING:
        raise InvalidInput("start", f"must be an integer from 0 to {POSITION_CEILING}")
    return value


def router(families: Iterable[Declared[Any, Any]]) -> APIRouter:
    """The two routes, for the cached families that carry the audit's record."""
    known = {
        each.family.name: each
        for each in families
        if each.family.block is None and each.family.audit is not None
    }
    makers = {name: _maker(each) for name, each in known.items()}
    routes = APIRouter(tags=["audit"])

    async def verify(request: Request, runtime: RuntimeDep) -> Response:
        def cached(key: Key, positions: NDArray[np.int64]) -> NDArray[Any]:
            # the claimed table is a GET's: its rows from the cache's pages, kept there
            return batches.rows_at(runtime, key, positions)

        query = _query(request)
        offer = _offer(query)
        offer.chosen(request)
        posted = await _read(request, runtime, query)
        claimed = _claim(query, posted.fields)
        layered = "" not in posted.tables
        if layered and claimed.config is None:
            raise InvalidInput(
                next(iter(posted.tables)) + "/cos",
                "a table per layer type is verified against a config (config in a JSON body)",
            )
        found, keys = {}, []
        for layer, table in posted.tables.items():
            extra = {"layer_type": layer} if layered else {}
            spec = await _spec(runtime, known, query, claimed, table, posted.size, extra)
            claim = verifying.Claim(
                claimed.family, spec.parameters, spec.key, makers[claimed.family], cached
            )
            mine = table.posted()
            found[layer] = await _computed(runtime, mine, verifying.verify, claim, mine)
            keys.append(spec.key)
        return await _answer(request, runtime, offer, _joined(found), *keys)

    async def identify(request: Request, runtime: RuntimeDep) -> Response:
        query = _query(request)
        unknown = [name for name in query if name not in ("start", "format", "shape", "dtype")]
        if unknown:
            raise InvalidParameter(unknown[0], "is not a parameter of identify (start, format)")
        offer = _offer(query)
        offer.chosen(request)
        read = await _read(request, runtime, query)
        claimed = [name for name in ("family", "parameters", "config") if name in read.fields]
        if claimed:
            raise InvalidInput(claimed[0], "identify takes no claim: send it to /v1/verify")
        found = {}
        for layer, table in read.tables.items():
            posted = table.posted()
            start = int(table.positions.min())
            found[layer] = await _computed(
                runtime, posted, identifying.identify, posted, makers, len(table.parts), start
            )
        return await _answer(request, runtime, offer, _joined(found))

    for path, endpoint, operation, summary in (
        (
            VERIFY,
            verify,
            "verifyTable",
            "A client's own table against what a family's GET or a model's config says it "
            "should be: match, bands, and a diagnosis of the known mistakes.",
        ),
        (
            IDENTIFY,
            identify,
            "identifyTable",
            "A client's table with no claim: the GETs that reproduce it, best first.",
        ),
    ):
        routes.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            operation_id=operation,
            summary=summary,
            response_class=Response,
            openapi_extra={
                "requestBody": {
                    "required": True,
                    "content": {
                        MEDIA_TYPES[fmt]: {"schema": {"type": "object"}}
                        if codecs.textual(fmt)
                        else openapi.BINARY
                        for fmt in BODY_FORMATS
                    },
                }
            },
            responses={
                200: {"content": {"application/json": {}}, "description": "The answer."},
                **openapi.problems_of(400, 406, 413, 415, 422),
            },
        )
    return routes


async def _queried(
    runtime: Runtime, known: Mapping[str, Declared[Any, Any]], table: Table, stop: int
) -> tables.Spec:
    """The key of a claim made in the query: its parameters validated as the family's
    ``GET`` validates them, each refusal naming the query's parameter."""
    declared = known.get(table.family)
    if declared is None:
        raise InvalidParameter("family", f"must be one of {', '.join(known)}")
    parameters = dict(table.parameters)
    if "max_len" in declared.query.model_fields:
        parameters.setdefault("max_len", stop)
    try:
        query = declared.query.model_validate(parameters)
    except ValidationError as exc:
        errors = [{**e, "loc": ("query", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None
    key: Key = await declared.key_of(runtime, query)
    rows = declared.block(query, key).max_len
    if stop > rows:
        raise InvalidParameter(
            "max_len", f"the posted rows reach position {stop - 1}, past {rows} rows"
        )
    return tables.Spec(key, table.family, query.model_dump(exclude_unset=True))


def _claim(query: Mapping[str, str], fields: Mapping[str, Any]) -> Table:
    """The claim: the query's family and ``GET`` parameters, or the JSON body's."""
    in_query = "family" in query
    in_body = any(name in fields for name in ("family", "parameters", "config"))
    if in_query and in_body:
        raise InvalidParameter("family", "the claim is in the query or in the body, not both")
    if in_query:
        parameters = {k: v for k, v in query.items() if k not in _OWN}
        return Table(family=query["family"], parameters=parameters)
    if not in_body:
        raise InvalidParameter(
            "family",
            "is required: the table's family and its GET parameters (in the query, or "
            "family, parameters or config in a JSON body); /v1/identify takes no claim",
        )
    given = {name: fields[name] for name in ("family", "parameters", "config") if name in fields}
    if "config" in given:
        given.setdefault("family", "rotary")  # what a model's config.json mostly makes
    try:
        return Table.model_validate(given)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


async def _computed(runtime: Runtime, posted: verifying.Posted, function: Any, *args: Any) -> Any:
    """``function`` run in a worker thread, in the lane the table's entries choose (a few
    tables of its size are computed: the claim's, the exact one, the library's), a large
    one in the large answers' turns."""
    entries = len(posted.positions) * posted.width
    elements = 4 * entries
    async with handlers.permit(runtime, 8 * entries > handlers.LARGE_ANSWER_BYTES):
        return await runtime.compute(elements, function, *args)


_RANK: Final = {"bitwise": 0, "library": 1, "float16": 2, "bfloat16": 3, "different": 4}


def _joined(found: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """One table's answer as it is; a table per layer type's each under ``tables``, with
    the farthest match of them (verify) or whether every one matched (identify)."""
    if "" in found:
        return found[""]
    answers = dict(found)
    if all("match" in each for each in answers.values()):
        worst = max((each["match"] for each in answers.values()), key=_RANK.__getitem__)
        return {"match": worst, "tables": answers}
    return {"matched": all(each["matched"] for each in answers.values()), "tables": answers}


async def _spec(
    runtime: Runtime,
    known: Mapping[str, Declared[Any, Any]],
    query: Mapping[str, str],
    claimed: Table,
    table: _Rows,
    size: int,
    extra: Mapping[str, Any],
) -> tables.Spec:
    """The key the claim names for a posted table: its rows' first position its ``start``
    and their last its ``max_len`` unless the claim says."""
    stop = int(table.positions.max()) + 1
    parameters = {**claimed.parameters, **extra}
    named = Table(family=claimed.family, parameters=parameters, config=claimed.config)
    if "family" in query:
        return await _queried(runtime, known, named, stop)
    return await tables.spec_of(
        runtime,
        known,
        named,
        "claim",
        stop,
        size,
        "max_len",
        "the posted table's, not the claim's: start (or position_ids) goes beside the table",
    )


async def _answer(
    request: Request, runtime: Runtime, offer: Offer[Any], found: Any, *keys: Key
) -> Response:
    async def encode(fmt: Any, gzip: bool) -> Encoded:
        return {}, orjson.dumps(found)

    engine = registry.library_engine(*keys) if keys else None
    return await answer(
        request, runtime, Plan(offer, encode, gzip_from=None, vary=False, engine=engine)
    )
