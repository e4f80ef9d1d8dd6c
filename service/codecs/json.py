"""JSON: tables and results as nested lists of the shortest float texts that round-trip at
their dtype, and apply bodies (``{"embeddings": [...], "position_ids": [...], "dtype": ...}``)
parsed with their number count bounded before anything is built, and their nested lists
checked (numbers only, rectangular, at most ``MAX_DIMS`` deep) before numpy sees them."""

from __future__ import annotations

import functools
import itertools
import json as stdlib_json
import re
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import orjson
from numpy.typing import NDArray

from service.arrays import joined
from service.codecs.types import MAX_DIMS, MEDIA_TYPES, Encoded, Parts
from service.errors import InvalidInput, Limit, MalformedBody
from service.text import shown

BODY_FIELDS: Final = ("embeddings", "position_ids", "dtype")
_QUOTED_FIELDS: Final = tuple(b'"' + field.encode() + b'"' for field in BODY_FIELDS)
_DTYPES: Final = ("float16", "float32", "float64")
_NOT_NUMBERS: Final = {
    str: "strings, which are not numbers",
    bool: "true or false, which are not numbers",
    type(None): "null, which is not a number",
    dict: "objects, which are not numbers",
}


@functools.cache
def _float16_texts() -> NDArray[np.object_]:
    """The shortest round-tripping text of every float16 bit pattern (orjson writes
    float16 with float32 digits: ``0.8413086`` where ``0.8413`` is enough); ``null`` for
    infinities and NaN."""
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    # JSON has no infinity or NaN: null, as orjson writes them for float32 and float64
    return np.array([str(v).encode() if np.isfinite(v) else b"null" for v in values], dtype=object)


def _float16_json(texts: NDArray[np.object_]) -> bytes:
    if texts.ndim == 1:
        return b"[" + b",".join(texts) + b"]"
    return b"[" + b",".join(_float16_json(part) for part in texts) + b"]"


def _rows(array: NDArray[Any]) -> Any:
    if array.dtype != np.float16:
        return np.ascontiguousarray(array)
    return orjson.Fragment(_float16_json(_float16_texts()[array.view(np.uint16)]))


def encode(fields: Mapping[str, Any], parts: Parts, key: str = "data") -> Encoded:
    """``fields`` followed by ``key``: the concatenated ``parts`` as nested lists, each
    float in the shortest text that reads back to the same value at its dtype."""
    array = joined(parts)
    document = {**fields, key: _rows(array)}
    body = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    return {"content-type": MEDIA_TYPES["json"]}, body


def encode_named(fields: Mapping[str, Any], arrays: Mapping[str, Parts]) -> Encoded:
    """``fields`` followed by one member per array (each given as blocks of rows)."""
    document = {**fields, **{name: _rows(joined(parts)) for name, parts in arrays.items()}}
    body = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    return {"content-type": MEDIA_TYPES["json"]}, body


# orjson builds a list or an object in the time of about 8 numbers (2M nested lists: 661 ms
# of the GIL; 2M numbers: 74 ms), and turning nested lists into an array costs as much again
# (262,000 lists of one id: a third of a second, where 2M ids in one list take 0.3 s): each
# counts as 16 numbers, but for the few that any document's structure takes.
CONTAINER_COST: Final = 16
_FREE_CONTAINERS: Final = 64


def check_containers(count: int, numbers: Limit, what: str, parsed: int = 0) -> None:
    """The ``count`` lists and objects of a document, counted before it is parsed (inside
    strings too), each as :data:`CONTAINER_COST` numbers against ``numbers``, or the
    ``parsed`` numbers it holds where they cost more: what parsing it costs is the larger
    (262,000 lists of one number each passed the numbers' check, and took a third of a
    second; 2M numbers in rows of 512, the largest body allowed, stay allowed)."""
    containers = max(0, count - _FREE_CONTAINERS)
    numbers.check(
        f"{what}'s numbers ({parsed:,}), or its lists and objects past the first "
        f"{_FREE_CONTAINERS} ({containers:,}) as {CONTAINER_COST} numbers each,",
        max(parsed, containers * CONTAINER_COST),
        "send tensors as .npy, or with fewer, longer rows",
    )


def decode(body: bytes | bytearray, numbers: Limit) -> dict[str, NDArray[Any]]:
    """``{"embeddings": [...], "position_ids": [...], "dtype": "float32"}`` as arrays
    (``position_ids`` only when given); ``dtype`` (default float32) is the embeddings'
    element type. At most ``numbers`` numbers are parsed. A field given twice is refused,
    where a JSON parser would quietly keep the last."""
    document = _document(body, numbers, BODY_FIELDS, 'must be a JSON object: {"embeddings": [...]}')
    if "embeddings" not in document:
        raise InvalidInput("embeddings", "is required")
    dtype = document.get("dtype", "float32")
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise InvalidInput("dtype", "must be float16, float32 or float64")
    arrays = {"embeddings": floats(document["embeddings"], "embeddings", dtype)}
    if document.get("position_ids") is not None:
        arrays["position_ids"] = integers(document["position_ids"], "position_ids")
    return arrays


def positions(body: bytes | bytearray, numbers: Limit, whole: bool) -> NDArray[Any]:
    """``{"position_ids": [...]}`` as an array: integers (int64) when ``whole``, else any
    finite numbers (float64); bounded as :func:`decode`'s bodies are."""
    fields = ("position_ids",)
    document = _document(body, numbers, fields, 'must be a JSON object: {"position_ids": [...]}')
    if document.get("position_ids") is None:
        raise InvalidInput("position_ids", "is required")
    value = document["position_ids"]
    return integers(value, "position_ids") if whole else floats(value, "position_ids", "float64")


def _document(
    body: bytes | bytearray,
    numbers: Limit,
    fields: tuple[str, ...],
    shape: str,
    also: re.Pattern[str] | None = None,
) -> dict[str, Any]:
    """The JSON object ``body`` holds, its numbers and containers counted before it is
    parsed, its fields among ``fields`` (or matching ``also``), none given twice
    (``shape``: what it must be)."""
    parsed = body.count(b",") + 1
    numbers.check("the JSON body's numbers", parsed)
    check_containers(body.count(b"[") + body.count(b"{"), numbers, "the JSON body", parsed)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):
            raise MalformedBody(
                f"not valid JSON: nested too deeply ({exc}); arrays have at most "
                f"{MAX_DIMS} dimensions"
            ) from None
        raise unreadable(exc, body, "the body") from None
    if not isinstance(document, dict):
        raise InvalidInput("body", shape)
    _refuse_repeated_fields(body)
    unknown = sorted(
        name for name in set(document) - set(fields) if also is None or not also.fullmatch(name)
    )
    if unknown:
        raise InvalidInput(shown(unknown[0]), f"is not a field ({', '.join(fields)})")
    return document


# a field's name just before a number: ``"rope_theta": 1000...``, or in its list
_FIELD_BEFORE: Final = re.compile(rb'"([^"\\]{1,64})"\s*:[\s\[\],0-9.eE+-]*$')
_NUMBER: Final = re.compile(rb"-?[0-9.eE+-]*")


def unreadable(exc: orjson.JSONDecodeError, body: bytes | bytearray, what: str) -> MalformedBody:
    """Why orjson could not read ``body`` (``what`` it is) as a client can act on it: a
    number past float64's range (orjson reads an integer past 64 bits as a float, and 400
    digits as infinity) is said so, with the field that holds it where the body says."""
    if not str(exc).startswith("number is infinity"):
        return MalformedBody(f"{what} is not valid JSON (NaN and Infinity are not JSON): {exc}")
    number = _NUMBER.match(body, exc.pos)
    digits = len(number[0]) if number else 0
    before = _FIELD_BEFORE.search(bytes(body[max(0, exc.pos - 4096) : exc.pos]))
    field = {} if before is None else {"field": shown(before[1].decode("utf-8", "replace"))}
    held = f" in {field['field']}" if field else ""
    return MalformedBody(
        f"{what} holds a number{held} out of range: {digits:,} characters, past float64's "
        f"1.8e308 (JSON numbers are read as float64), at line {exc.lineno} column {exc.colno}",
        **field,
    )


def _refuse_repeated_fields(body: bytes | bytearray) -> None:
    """Refuse a body that gives a field twice. orjson keeps the last silently and cannot
    say, so a body where that is possible (a field's quoted name occurs twice, or a
    backslash could spell one another way) is parsed again by the standard library, which
    reports every object's keys; for any other body this costs a few scans of its bytes."""
    if b"\\" not in body and all(body.count(field) < 2 for field in _QUOTED_FIELDS):
        return
    repeated: list[str | None] = []

    def first_repeated(pairs: list[tuple[str, Any]]) -> None:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                repeated.append(key)
                return
            seen.add(key)
        repeated.append(None)

    try:
        stdlib_json.loads(body, object_pairs_hook=first_repeated)
    except (ValueError, RecursionError):  # orjson read it: the standard library must too
        raise MalformedBody("not valid JSON") from None
    if repeated and repeated[-1] is not None:  # the outermost object comes last
        raise InvalidInput(shown(repeated[-1]), "appears more than once in the body")


def _shape(value: object, name: str) -> tuple[tuple[int, ...], set[type]]:
    """The shape of nested lists of numbers, and the types of their numbers. Level by
    level, so that numpy never sees anything but rectangular lists of ints and floats."""
    if type(value) is not list:
        raise InvalidInput(name, "must be a list of numbers (nested lists for more dimensions)")
    level: list[list[Any]] = [value]
    shape: list[int] = []
    while True:
        lengths = set(map(len, level))
        if len(lengths) > 1:
            raise InvalidInput(name, "is ragged: every row must have the same length")
        shape.append(lengths.pop())
        kinds = set(map(type, itertools.chain.from_iterable(level)))
        if kinds != {list}:
            break
        if len(shape) == MAX_DIMS:
            raise InvalidInput(
                name, f"is nested too deeply: it may have at most {MAX_DIMS} dimensions"
            )
        level = list(itertools.chain.from_iterable(level))
    if list in kinds:
        raise InvalidInput(name, "is ragged: it mixes lists and numbers at the same depth")
    for kind, words in _NOT_NUMBERS.items():
        if kind in kinds:
            raise InvalidInput(name, f"holds {words}")
    if not kinds <= {int, float}:
        raise InvalidInput(name, "must hold numbers only")
    return tuple(shape), kinds


def floats(value: object, name: str, dtype: str) -> NDArray[Any]:
    _shape(value, name)
    try:
        with np.errstate(over="ignore"):
            array = np.array(value, dtype=dtype)
    except OverflowError:  # an int too large for a float: orjson makes floats of those
        raise InvalidInput(name, f"holds numbers outside the {dtype} range") from None
    if not np.isfinite(array).all():
        raise InvalidInput(name, f"holds numbers outside the {dtype} range")
    return array


def integers(value: object, name: str) -> NDArray[np.int64]:
    _, kinds = _shape(value, name)
    if float in kinds:
        floats = (x for x in _leaves(value) if type(x) is float)
        first = next(floats)
        if first.is_integer() and abs(first) >= 2**63:
            # orjson reads an integer outside int64 and uint64 as a float
            raise InvalidInput(name, "holds an integer outside the int64 range")
        raise InvalidInput(
            name, f"must be integers, written without a decimal point or exponent: {first}"
        )
    try:
        return np.array(value, dtype=np.int64)
    except OverflowError:
        raise InvalidInput(name, "holds an integer outside the int64 range") from None


def _leaves(value: Any) -> Any:
    while value and type(value[0]) is list:
        value = list(itertools.chain.from_iterable(value))
    return value


# what a posted table's JSON body holds: its arrays, where its rows are, and the claim
TABLE_ARRAYS: Final = ("cos", "sin", "data")
# a table of a layer type: its name (a config's layer type), then the array's
LAYER_MEMBER: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}/(cos|sin|data)")
TABLE_FIELDS: Final = (
    *TABLE_ARRAYS,
    "dtype",
    "position_ids",
    "start",
    "family",
    "parameters",
    "config",
)


def table(
    body: bytes | bytearray, numbers: Limit
) -> tuple[dict[str, Any], dict[str, NDArray[Any]]]:
    """A posted table (``POST /v1/verify``, ``/v1/identify``): ``{"cos": [[...]], "sin":
    [[...]]}`` or ``{"data": [[...]]}`` (a table per layer type: ``"NAME/cos"``, ...) as
    arrays of ``dtype`` (float32 unless the body says: the numbers a float32 table's JSON
    holds are its values' shortest texts),
    ``position_ids`` as int64, and the document's other fields (the claim) as they are;
    bounded as :func:`decode`'s."""
    document = _document(
        body,
        numbers,
        TABLE_FIELDS,
        'must be a JSON object: {"cos": [...], "sin": [...]}',
        LAYER_MEMBER,
    )
    dtype = document.pop("dtype", "float32")
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise InvalidInput("dtype", "must be float16, float32 or float64")
    named = [name for name in document if name in TABLE_ARRAYS or LAYER_MEMBER.fullmatch(name)]
    arrays = {
        name: floats(document.pop(name), name, dtype)
        for name in named
        if document.get(name) is not None
    }
    if document.get("position_ids") is not None:
        arrays["position_ids"] = integers(document.pop("position_ids"), "position_ids")
    return document, arrays
