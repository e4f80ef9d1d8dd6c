"""JSON: tables and results as nested lists of the shortest float texts that round-trip at
their dtype, and apply bodies (``{"embeddings": [...], "position_ids": [...], "dtype": ...}``)
parsed with their number count bounded before anything is built."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import orjson
from numpy.typing import NDArray

from service.codecs.types import MEDIA_TYPES, Encoded, Parts
from service.encodings.registry import joined
from service.errors import InvalidInput, Limit, MalformedBody

BODY_FIELDS: Final = ("embeddings", "position_ids", "dtype")
_NOT_NUMBERS: Final = re.compile(rb"\b(?:true|false|null)\b")


@functools.cache
def _float16_texts() -> NDArray[np.object_]:
    """The shortest round-tripping text of every float16 bit pattern (orjson writes
    float16 with float32 digits: ``0.8413086`` where ``0.8413`` is enough)."""
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    return np.array([str(v).encode() for v in values], dtype=object)


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


def _numbers(value: object, name: str, dtype: str | None) -> NDArray[Any]:
    try:
        array = np.array(value)
    except (ValueError, OverflowError):
        raise InvalidInput(name, "is ragged: every row must have the same length") from None
    if array.dtype.kind not in "iuf" and array.size:
        raise InvalidInput(name, "must hold numbers only")
    if dtype is None:
        return array
    with np.errstate(over="ignore"):
        converted = array.astype(dtype)
    if not np.isfinite(converted).all():
        raise InvalidInput(name, f"holds numbers outside the {dtype} range")
    return converted


def decode(body: bytes | bytearray, numbers: Limit) -> dict[str, NDArray[Any]]:
    """``{"embeddings": [...], "position_ids": [...], "dtype": "float32"}`` as arrays
    (``position_ids`` only when given); ``dtype`` (default float32) is the embeddings'
    element type. At most ``numbers`` numbers are parsed."""
    numbers.check("the JSON body's numbers", body.count(b",") + 1)
    maybe = b"true" in body or b"false" in body or b"null" in body  # fast; the regex is exact
    if maybe and _NOT_NUMBERS.search(body):
        raise InvalidInput("body", "true, false and null are not numbers")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(f"not valid JSON (NaN and Infinity are not JSON): {exc}") from None
    if not isinstance(document, dict):
        raise InvalidInput("body", 'must be a JSON object: {"embeddings": [...]}')
    unknown = sorted(set(document) - set(BODY_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field ({', '.join(BODY_FIELDS)})")
    if "embeddings" not in document:
        raise InvalidInput("embeddings", "is required")
    dtype = document.get("dtype", "float32")
    if dtype not in ("float16", "float32", "float64"):
        raise InvalidInput("dtype", "must be float16, float32 or float64")
    arrays = {"embeddings": _numbers(document["embeddings"], "embeddings", dtype)}
    if document.get("position_ids") is not None:
        arrays["position_ids"] = _numbers(document["position_ids"], "position_ids", None)
    return arrays
