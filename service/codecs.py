"""Wire formats: content negotiation, and tables to and from JSON, ``.npy`` and raw bytes.

Encoders are pure functions returning ``(headers, body)``; decoders never unpickle.
"""

from __future__ import annotations

import functools
import gzip
import io
import math
import re
import zipfile
import zlib
from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

import numpy as np
import orjson
from numpy.typing import NDArray

from service.errors import (
    BodyTooLarge,
    InvalidParameter,
    LimitExceeded,
    MalformedBody,
    NotAcceptable,
)

Format = Literal["json", "npy", "npz", "raw"]
TableFormat = Literal["json", "npy", "raw"]
BodyFormat = Literal["json", "npy", "npz"]
FORMATS: Final[tuple[Format, ...]] = get_args(Format)
TABLE_FORMATS: Final[tuple[TableFormat, ...]] = get_args(TableFormat)
BODY_FORMATS: Final[tuple[BodyFormat, ...]] = get_args(BodyFormat)
MEDIA_TYPES: Final[dict[Format, str]] = {
    "json": "application/json",
    "npy": "application/x-npy",
    "npz": "application/x-npz",
    "raw": "application/octet-stream",
}
NPZ_MEMBERS: Final = ("embeddings", "position_ids")
Headers = dict[str, str]
Buffer = bytes | bytearray | memoryview
_NPY_MAGIC: Final = b"\x93NUMPY\x01\x00"
_NPY_HEADER_LIMIT: Final = 12 + 10000  # numpy's own cap on a header's size
_BODY_SETTING: Final = "PE_MAX_BODY_BYTES"
_NOT_NUMBERS: Final = re.compile(rb"\b(?:true|false|null)\b")


def _weighted(header: str) -> list[tuple[str, float]]:
    """``(token, q)`` for each entry of an ``Accept``-style header, lower-cased, in order;
    a malformed ``q`` counts as 0."""
    entries = []
    for entry in header.split(","):
        token, *params = (part.strip() for part in entry.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        if token:
            entries.append((token.lower(), q))
    return entries


def _accept_ranges(accept: str) -> list[tuple[str, float]]:
    """``(media range, q)`` for each well-formed entry of an ``Accept`` header, in order."""
    ranges = [("*/*" if media == "*" else media, q) for media, q in _weighted(accept)]
    return [(media, q) for media, q in ranges if media.count("/") == 1]


def _preference(media_type: str, ranges: list[tuple[str, float]]) -> tuple[float, int]:
    """The ``q`` the most specific matching range gives ``media_type``, and that range's
    position in the header (earlier wins a tie)."""
    kind = media_type.split("/")[0]
    best: tuple[int, float, int] = (-1, 0.0, len(ranges))
    for index, (media, q) in enumerate(ranges):
        specificity = {media_type: 2, f"{kind}/*": 1, "*/*": 0}.get(media, -1)
        if specificity > best[0]:
            best = (specificity, q, index)
    return best[1], best[2]


def negotiate(accept: str | None, offered: tuple[Format, ...] = TABLE_FORMATS) -> Format:
    """The format an ``Accept`` header asks for; the first offered one if it asks for none.

    Highest ``q`` wins, then the range the client listed first, then the order of
    ``offered``. Raises :class:`NotAcceptable` when every offered type has ``q=0``.
    """
    if accept is None or not accept.strip():
        return offered[0]
    ranges = _accept_ranges(accept)
    if not ranges:
        return offered[0]
    ranked = []
    for order, fmt in enumerate(offered):
        q, index = _preference(MEDIA_TYPES[fmt], ranges)
        if q > 0:
            ranked.append((-q, index, order, fmt))
    if not ranked:
        raise NotAcceptable(accept, [MEDIA_TYPES[fmt] for fmt in offered])
    return min(ranked)[3]


def _little_endian(array: NDArray[Any]) -> NDArray[Any]:
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))


def npy_header(shape: tuple[int, ...], dtype: np.dtype[Any]) -> bytes:
    """A version 1.0 ``.npy`` header for a C-order little-endian array."""
    descr = np.lib.format.dtype_to_descr(dtype.newbyteorder("<"))
    text = repr({"descr": descr, "fortran_order": False, "shape": shape})
    size = len(_NPY_MAGIC) + 2 + len(text) + 1
    text += " " * (-size % 64) + "\n"
    return _NPY_MAGIC + len(text).to_bytes(2, "little") + text.encode("latin1")


def encode_npy(array: NDArray[Any]) -> tuple[Headers, bytes]:
    """An ``.npy`` file that ``numpy.load(..., allow_pickle=False)`` reads."""
    data = _little_endian(array)
    body = b"".join((npy_header(data.shape, data.dtype), data.data.cast("B")))
    return {"content-type": MEDIA_TYPES["npy"]}, body


def encode_raw(array: NDArray[Any]) -> tuple[Headers, bytes]:
    """Little-endian C-order bytes, with the shape and dtype in ``X-Shape``/``X-Dtype``."""
    data = _little_endian(array)
    headers = {
        "content-type": MEDIA_TYPES["raw"],
        "x-shape": ",".join(map(str, data.shape)),
        "x-dtype": data.dtype.name,
    }
    return headers, data.tobytes()


@functools.cache
def _float16_texts() -> NDArray[np.object_]:
    """The shortest round-tripping text of every float16 bit pattern (orjson writes
    float16 with float32 digits: ``0.8413086`` where ``0.8413`` is enough)."""
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    return np.array([str(v).encode() for v in values], dtype=object)


def _json_rows(array: NDArray[Any]) -> Any:
    if array.dtype != np.float16:
        return np.ascontiguousarray(array)
    return orjson.Fragment(_float16_json(_float16_texts()[array.view(np.uint16)]))


def _float16_json(texts: NDArray[np.object_]) -> bytes:
    if texts.ndim == 1:
        return b"[" + b",".join(texts) + b"]"
    return b"[" + b",".join(_float16_json(part) for part in texts) + b"]"


def encode_json(
    fields: Mapping[str, Any], array: NDArray[Any], key: str = "data"
) -> tuple[Headers, bytes]:
    """``fields`` followed by ``key``: the rows of ``array``, each float in the shortest
    text that reads back to the same value at the array's dtype."""
    document = {**fields, key: _json_rows(array)}
    body = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    return {"content-type": MEDIA_TYPES["json"]}, body


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header admits gzip (by name, or by ``*``)."""
    q = dict(_weighted(accept_encoding or ""))
    return q.get("gzip", q.get("x-gzip", q.get("*", 0.0))) > 0


def gzipped(headers: Headers, body: bytes) -> tuple[Headers, bytes]:
    """``body`` gzip-compressed, with ``Content-Encoding: gzip``."""
    return {**headers, "content-encoding": "gzip"}, gzip.compress(body, compresslevel=1, mtime=0)


def encode_npz(array: NDArray[Any]) -> tuple[Headers, bytes]:
    """An uncompressed ``.npz`` archive holding ``array`` as ``embeddings``."""
    buffer = io.BytesIO()
    np.savez(buffer, embeddings=_little_endian(array))
    return {"content-type": MEDIA_TYPES["npz"]}, buffer.getvalue()


def encode(
    fmt: Format, fields: Mapping[str, Any], array: NDArray[Any], key: str = "data"
) -> tuple[Headers, bytes]:
    """``array`` in ``fmt``; ``fields`` describe it and appear in JSON only, where the
    array is the member ``key``."""
    if fmt == "json":
        return encode_json(fields, array, key)
    if fmt == "npy":
        return encode_npy(array)
    if fmt == "npz":
        return encode_npz(array)
    return encode_raw(array)


def decode_npy(body: Buffer, name: str = "embeddings") -> NDArray[Any]:
    """The array in an ``.npy`` body, without copying its data (the result is a view of
    ``body``). Never unpickles: arrays of Python objects are refused."""
    view = memoryview(body)
    if view[:6].tobytes() != b"\x93NUMPY":
        raise MalformedBody(f"{name}: not an .npy file (it does not start with the .npy magic)")
    head = io.BytesIO(view[:_NPY_HEADER_LIMIT].tobytes())
    try:
        version = np.lib.format.read_magic(head)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(head)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(head)
        else:
            raise ValueError(f"version {version} is not supported; use 1.0 or 2.0")
    except (ValueError, OSError, EOFError) as exc:
        raise MalformedBody(f"{name}: not a readable .npy file: {exc}") from None
    if dtype.hasobject:
        raise InvalidParameter(
            name, "holds Python objects, which are never unpickled; send numbers", "body"
        )
    count = math.prod(shape)
    offset = head.tell()
    expected = count * dtype.itemsize
    if len(view) - offset != expected:
        raise MalformedBody(
            f"{name}: the header promises {expected:,} bytes of data for shape {shape} "
            f"{dtype}, the file holds {len(view) - offset:,}"
        )
    flat = np.frombuffer(view, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order="F" if fortran else "C")


def decode_npz(body: Buffer, limit: int) -> tuple[NDArray[Any], NDArray[Any] | None]:
    """``embeddings`` and the optional ``position_ids`` from an ``.npz`` archive whose
    members hold at most ``limit`` bytes once decompressed."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
        members = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
        unknown = sorted(set(members) - set(NPZ_MEMBERS))
        if unknown:
            raise InvalidParameter(
                unknown[0],
                f"is not a member this endpoint reads ({', '.join(NPZ_MEMBERS)})",
                "body",
            )
        if "embeddings" not in members:
            raise InvalidParameter("embeddings", "is required in the .npz archive", "body")
        arrays: dict[str, NDArray[Any]] = {}
        room = limit
        for name, info in members.items():
            with archive.open(info) as member:
                data = member.read(room + 1)
            room -= len(data)
            if room < 0:
                raise BodyTooLarge(
                    "the decompressed .npz archive", limit - room, limit, _BODY_SETTING
                )
            arrays[name] = decode_npy(data, name)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise MalformedBody(f"not a readable .npz archive: {exc}") from None
    return arrays["embeddings"], arrays.get("position_ids")


def _numbers(value: object, name: str, dtype: str | None) -> NDArray[Any]:
    try:
        array = np.array(value)
    except (ValueError, OverflowError):
        raise InvalidParameter(
            name, "is ragged: every row must have the same length", "body"
        ) from None
    if array.dtype.kind not in "iuf" and array.size:
        raise InvalidParameter(name, "must hold numbers only", "body")
    if dtype is None:
        return array
    with np.errstate(over="ignore"):
        converted = array.astype(dtype)
    if not np.isfinite(converted).all():
        raise InvalidParameter(name, f"holds numbers outside the {dtype} range", "body")
    return converted


def decode_json(
    body: bytes | bytearray, max_numbers: int
) -> tuple[NDArray[Any], NDArray[Any] | None]:
    """``{"embeddings": [...], "position_ids": [...], "dtype": "float32"}`` as arrays;
    ``dtype`` (default float32) is the embeddings' element type. At most ``max_numbers``
    numbers are parsed."""
    numbers = body.count(b",") + 1
    if numbers > max_numbers:
        raise LimitExceeded("the JSON body's numbers", numbers, max_numbers, "PE_MAX_JSON_ELEMENTS")
    maybe = b"true" in body or b"false" in body or b"null" in body  # fast; the regex is exact
    if maybe and _NOT_NUMBERS.search(body):
        raise InvalidParameter("body", "true, false and null are not numbers", "body")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(f"not valid JSON (NaN and Infinity are not JSON): {exc}") from None
    if not isinstance(document, dict):
        raise InvalidParameter("body", 'must be a JSON object: {"embeddings": [...]}', "body")
    unknown = sorted(set(document) - {"embeddings", "position_ids", "dtype"})
    if unknown:
        raise InvalidParameter(
            unknown[0], "is not a field (embeddings, position_ids, dtype)", "body"
        )
    if "embeddings" not in document:
        raise InvalidParameter("embeddings", "is required", "body")
    dtype = document.get("dtype", "float32")
    if dtype not in ("float16", "float32", "float64"):
        raise InvalidParameter("dtype", "must be float16, float32 or float64", "body")
    embeddings = _numbers(document["embeddings"], "embeddings", dtype)
    ids = document.get("position_ids")
    return embeddings, None if ids is None else _numbers(ids, "position_ids", None)


def decode_raw(body: bytes, shape: tuple[int, ...], dtype: str) -> NDArray[Any]:
    """Little-endian C-order bytes as an array of ``shape`` and ``dtype``."""
    expected = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if len(body) != expected:
        raise MalformedBody(f"expected {expected} bytes for {shape} {dtype}, got {len(body)}")
    return np.frombuffer(body, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
